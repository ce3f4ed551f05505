"""Run the server with uvicorn: one process (the app built here) or N worker processes.

uvicorn stops on SIGTERM or SIGINT gracefully: it stops accepting connections, lets the requests
in flight finish (up to ``GRACEFUL_SECONDS``), runs the app's shutdown, then exits 0.
"""

from __future__ import annotations

import os

from scholar_es.serve.state import API_KEY_ENV, DEFAULT_MAX_BODY

GRACEFUL_SECONDS = 30


def serve(
    target: str,
    *,
    host: str = "127.0.0.1",
    port: int = 9200,
    workers: int = 1,
    model: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    profile: str | None = None,
    log_level: str = "info",
) -> None:
    import uvicorn
    from fastapi import FastAPI

    def run(app: FastAPI | str, *, factory: bool = False, workers: int | None = None) -> None:
        uvicorn.run(
            app,
            host=host,
            port=port,
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
                "SCHOLAR_ES_SERVE_PROFILE": profile or "",
            }
        )
        run("scholar_es.serve.app:app_from_env", factory=True, workers=workers)
        return
    from scholar_es.serve.app import create_app
    from scholar_es.serve.state import open_state

    state = open_state(
        target,
        model=model,
        api_key=os.environ.get(API_KEY_ENV) or None,
        max_body=max_body,
        profile=profile,
    )
    run(create_app(state))
