"""``scholar-es serve`` and ``console``: the HTTP server and the dev-console runner."""

from __future__ import annotations

import sys

import click

from scholar_es.cli.options import backend_option, fail, run_body, target_option, use_backend
from scholar_es.client import default_target, display_target, is_url


@click.command("console")
@click.argument("file", required=False, type=click.File("r", errors="surrogateescape"), default="-")
@target_option
def console_cmd(file, target) -> None:
    """Run Kibana dev console requests from FILE (default: standard input).

    Each request is a ``METHOD path`` line followed by an optional JSON body (NDJSON for
    _bulk and _msearch); it ends at a blank line, the next request line or the end of the
    input, runs at once, and its response is printed as one JSON line (errors included).
    At a terminal (standard input a TTY) it shows a prompt (``scholar-es> ``, ``... `` inside a
    request; a blank line sends it, Ctrl-D ends) and pretty-prints each response when standard
    output is a terminal too; piped, the output stays one JSON line per request. The same file
    runs against the embedded engine and a real cluster. The exit status is 1 when any request
    failed.
    """
    from scholar_es.client import connect
    from scholar_es.engine.rest.console import run_console

    es = run_body(
        lambda: connect(target or default_target(), must_exist=not is_url(target or default_target()))
    )
    interactive = file.isatty()  # standard input (or a FILE) that is a terminal: a person types
    if interactive:
        click.echo(
            f"scholar-es console on {display_target(target or default_target())}: a request is "
            "'METHOD path' and an optional JSON body; a blank line sends it, Ctrl-D ends",
            err=True,
        )
    failed = run_console(
        es,
        file,
        sys.stdout,
        prompt_to=sys.stderr if interactive else None,
        pretty=interactive and sys.stdout.isatty(),
    )
    if interactive:
        click.echo("", err=True)  # the last prompt's line ends
    sys.exit(1 if failed else 0)


def _parse_size(text: str) -> int:
    """``100mb``, ``512kb``, ``1gb`` or a number of bytes."""
    units = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}
    t = text.strip().lower()
    for unit in ("kb", "mb", "gb", "b"):
        if t.endswith(unit) and t[: -len(unit)].strip().isdigit():
            return int(t[: -len(unit)]) * units[unit]
    if t.isdigit():
        return int(t)
    raise click.BadParameter(f"{text!r} is not a size; use e.g. 100mb, 512kb or a number of bytes")


@click.command("serve")
@target_option
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback only by default)."
)
@click.option("--port", default=9200, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.")
@click.option("--model", default=None, help="Embedding model [default: all-MiniLM-L6-v2, shipped offline].")
@click.option("--profile", default=None, help="The profile searches use (a built-in name or a JSON file).")
@click.option(
    "--max-body", default="100mb", show_default=True, help="Largest request body accepted (e.g. 100mb)."
)
@click.option(
    "--max-header-size",
    default="16kb",
    show_default=True,
    help="Largest request headers accepted, all lines together (Elasticsearch's http.max_header_size); "
    "more is answered 400 too_long_http_header_exception.",
)
@click.option(
    "--max-in-flight",
    default=None,
    help="In-flight requests breaker: twice the body bytes a process holds at once may not pass this; "
    "a request that would is answered 429 circuit_breaking_exception [default: a quarter of the memory].",
)
@click.option("--log-level", default="info", show_default=True, help="uvicorn log level (warning: quieter).")
@click.option(
    "--create",
    is_flag=True,
    help="Create the --es directory (a new, empty engine) when it does not exist; without it a "
    "missing directory is refused, so a mistyped path never serves an empty engine.",
)
@backend_option
def serve_cmd(
    target,
    host,
    port,
    workers,
    model,
    profile,
    max_body,
    max_header_size,
    max_in_flight,
    log_level,
    create,
    backend,
) -> None:
    """Serve search over HTTP from one long-lived process (the model loaded once).

    \b
    /_scholar/search, query, multisection   the search API (JSON)
    /_scholar/strategies, health            what it offers, whether it is ready (503 unless green)
    /_scholar/openapi.json                  the search API's schema
    /_scholar/ui                            the search page
    /, /_bulk, /{index}/_search, ...        Elasticsearch's REST API (embedded engine only)

    With $SCHOLAR_ES_SERVE_API_KEY set, every route needs that key (Authorization: ApiKey KEY,
    or HTTP Basic with the key as password); set but empty, it is refused. SIGTERM (exit 0) or
    Ctrl-C stop it after the requests in flight; workers exit when their master dies.
    """
    use_backend(backend)  # workers inherit it: their embedders default to it
    import os

    from scholar_es.serve.run import serve
    from scholar_es.serve.state import API_KEY_ENV, api_key_from_env

    run_body(api_key_from_env)  # set but empty: one line, exit 2, before anything starts
    size = _parse_size(max_body)
    header_size = _parse_size(max_header_size)
    in_flight = None if max_in_flight is None else _parse_size(max_in_flight)
    target = target or default_target()
    if not is_url(target):
        from pathlib import Path

        from scholar_es.client import connect

        if not create and not Path(target).expanduser().exists():
            fail(
                f"no directory {target!r} to serve: pass --es with the engine's directory, or --create for a new, empty engine"
            )
        run_body(lambda: connect(target))  # a file or a bad scheme: one line, exit 2, before uvicorn starts
    if host not in ("127.0.0.1", "localhost", "::1") and not os.environ.get(API_KEY_ENV):
        click.echo(
            f"warning: listening on {host} without ${API_KEY_ENV}: anyone who reaches it can search "
            "and (with the embedded engine) write",
            err=True,
        )
    engine = "Elasticsearch REST API at /" if not is_url(target) else "cluster: its REST API stays there"
    page = f"search page http://{host}:{port}/_scholar/ui" if port else "port chosen by the system"
    click.echo(f"scholar-es serve: {display_target(target)} ({engine}); {page}", err=True)
    run_body(
        lambda: serve(
            target,
            host=host,
            port=port,
            workers=workers,
            model=model,
            max_body=size,
            max_header_size=header_size,
            max_in_flight=in_flight,
            profile=profile,
            log_level=log_level,
        )
    )
