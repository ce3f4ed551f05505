"""Run the server with uvicorn: one process (the app built here) or N worker processes.

uvicorn stops on SIGTERM or SIGINT gracefully: it stops accepting connections, lets the requests
in flight finish (up to ``GRACEFUL_SECONDS``) and runs the app's shutdown, then exits 0: a stop
asked for and done cleanly. (uvicorn re-raises the signal it caught once it has shut down; for
SIGINT its ``run`` swallows the KeyboardInterrupt, for SIGTERM the handler installed here turns
it into exit 0 where the process would otherwise die of it, status -15.)

What uvicorn is given besides the app:

* :class:`~scholar_es.serve.protocol.BoundedHttpToolsProtocol`, its httptools protocol with
  Elasticsearch's bounds on the request line (4kb) and headers (``--max-header-size``, 16kb);
* :func:`~scholar_es.serve.logs.log_config`, its logging with credentials masked in access lines;
* with ``--workers N``, the settings in ``SCHOLAR_ES_SERVE_*`` variables, and this process's id:
  each worker arranges to exit when this process dies (:func:`~scholar_es.serve.parent.exit_with_parent`), so a master
  killed with SIGKILL leaves no worker serving on the port.
"""

from __future__ import annotations

import os
import signal

from scholar_es.serve.parent import MASTER_PID_ENV
from scholar_es.serve.protocol import DEFAULT_MAX_HEADER_SIZE, MAX_HEADER_ENV
from scholar_es.serve.state import DEFAULT_MAX_BODY, api_key_from_env

GRACEFUL_SECONDS = 30


def _exit_zero(sig, frame) -> None:
    raise SystemExit(0)


def serve(
    target: str,
    *,
    host: str = "127.0.0.1",
    port: int = 9200,
    workers: int = 1,
    model: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    max_in_flight: int | None = None,
    profile: str | None = None,
    log_level: str = "info",
) -> None:
    import uvicorn
    from fastapi import FastAPI

    from scholar_es.serve.logs import log_config

    api_key = api_key_from_env()  # an empty key refused here, before anything starts
    os.environ[MAX_HEADER_ENV] = str(max_header_size)  # read by the protocol, in every worker

    def run(app: FastAPI | str, *, factory: bool = False, workers: int | None = None) -> None:
        uvicorn.run(
            app,
            host=host,
            port=port,
            http="scholar_es.serve.protocol:BoundedHttpToolsProtocol",
            log_config=log_config(),
            log_level=log_level,
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
            server_header=False,
            factory=factory,
            workers=workers,
        )

    if workers > 1:
        os.environ.update(
            {
                "SCHOLAR_ES_SERVE_TARGET": target,
                "SCHOLAR_ES_SERVE_MODEL": model or "",
                "SCHOLAR_ES_SERVE_MAX_BODY": str(max_body),
                "SCHOLAR_ES_SERVE_MAX_IN_FLIGHT": "" if max_in_flight is None else str(max_in_flight),
                "SCHOLAR_ES_SERVE_PROFILE": profile or "",
                MASTER_PID_ENV: str(os.getpid()),
            }
        )
        run("scholar_es.serve.app:app_from_env", factory=True, workers=workers)
        return
    from scholar_es.serve.app import create_app
    from scholar_es.serve.state import open_state

    state = open_state(
        target,
        model=model,
        api_key=api_key,
        max_body=max_body,
        profile=profile,
        max_in_flight=max_in_flight,
    )
    # uvicorn restores this handler after its graceful shutdown and re-raises SIGTERM into it
    signal.signal(signal.SIGTERM, _exit_zero)
    run(create_app(state))
