"""The application: the search API and page under ``/_scholar/``, Elasticsearch's REST API at the root.

:func:`create_app` builds it from a :class:`~scholar_es.serve.state.ServerState`;
:func:`app_from_env` is the factory each uvicorn worker process calls (``--workers N``), reading
its settings from the ``SCHOLAR_ES_SERVE_*`` environment the command line sets.
"""

from __future__ import annotations

import os
import threading
from contextlib import asynccontextmanager
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.routing import APIRoute
from starlette.responses import FileResponse
from starlette.staticfiles import StaticFiles

from scholar_es.engine.search import contexts
from scholar_es.serve import es_api, scholar_api
from scholar_es.serve.errors import error_response, install_handlers
from scholar_es.serve.guard import Guard
from scholar_es.serve.state import DEFAULT_MAX_BODY, ServerState, api_key_from_env, open_state, warm_model

UI_DIR = Path(__file__).resolve().parent / "ui"
PREFIX = "/_scholar"
#: Swagger UI's files (JavaScript, CSS, icon) as the ``fastapi-offline`` package ships them: the API
#: docs page loads nothing from outside the server (FastAPI's default page loads them from a CDN)
SWAGGER_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"


def _docs_routes(app: FastAPI) -> None:
    """``/_scholar/docs``: Swagger UI over ``/_scholar/openapi.json``, its files served here."""
    static = f"{PREFIX}/docs/static"
    app.mount(static, StaticFiles(directory=SWAGGER_DIR), name="docs-static")

    @app.get(f"{PREFIX}/docs", include_in_schema=False)
    def docs_page():
        return get_swagger_ui_html(
            openapi_url=f"{PREFIX}/openapi.json",
            title="scholar-es - API",
            swagger_js_url=f"{static}/swagger-ui-bundle.js",
            swagger_css_url=f"{static}/swagger-ui.css",
            swagger_favicon_url=f"{static}/favicon.png",
            oauth2_redirect_url=None,
        )


def create_app(state: ServerState, *, warm: bool = True) -> FastAPI:
    """The ASGI app over ``state``; ``warm`` loads the model in a background thread at startup."""
    from scholar_es import __version__

    @asynccontextmanager
    async def lifespan(app):
        if warm:
            threading.Thread(target=warm_model, args=(state,), name="scholar-es-warm", daemon=True).start()
        else:
            state.model_ready.set()
        yield

    app = FastAPI(
        title="scholar-es",
        version=__version__,
        summary="Scientific-literature search: the search API (/_scholar/) and, with the embedded "
        "engine, Elasticsearch's REST API at the root.",
        openapi_url=f"{PREFIX}/openapi.json",
        docs_url=None,  # served by _docs_routes, from local files
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.scholar = state
    install_handlers(app)
    search_api = scholar_api.router(state)
    app.include_router(search_api)
    _docs_routes(app)

    @app.get(f"{PREFIX}/ui", include_in_schema=False)
    def ui_page():
        return FileResponse(UI_DIR / "index.html", media_type="text/html")

    app.mount(f"{PREFIX}/ui/static", StaticFiles(directory=UI_DIR), name="ui")

    @app.api_route(
        PREFIX + "/{rest:path}", methods=["GET", "POST", "PUT", "DELETE", "HEAD"], include_in_schema=False
    )
    def scholar_unknown(rest: str, request: Request):
        allowed = sorted(
            m
            for r in search_api.routes
            if isinstance(r, APIRoute) and r.path == f"{PREFIX}/{rest}"
            for m in r.methods or ()
        )
        if allowed:  # a route of the search API, asked with another method
            return error_response(
                405,
                "method_not_allowed",
                f"{request.method} is not allowed on [{PREFIX}/{rest}]; use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        return error_response(
            404,
            "resource_not_found_exception",
            f"no route [{PREFIX}/{rest}]; the search API is described at {PREFIX}/openapi.json",
        )

    declare_security(app, required=state.api_key is not None)
    if state.embedded:
        app.include_router(es_api.router(state))
    app.add_middleware(Guard, state=state)
    return app


#: how a request carries the server's key ($SCHOLAR_ES_SERVE_API_KEY; scholar_es.serve.guard)
SECURITY_SCHEMES = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Authorization: ApiKey <key>` (or `Bearer <key>`), the key of "
        "$SCHOLAR_ES_SERVE_API_KEY; needed only when the server was started with it set.",
    },
    "Basic": {
        "type": "http",
        "scheme": "basic",
        "description": "HTTP Basic with the key as the password (any user name), as a browser sends it.",
    },
}


def declare_security(app: FastAPI, *, required: bool) -> None:
    """Declare the API key schemes in the OpenAPI document; ``required`` (a key is set): every
    operation needs one of them."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
            if required:
                schema["security"] = [{"ApiKey": []}, {"Basic": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def app_from_env() -> FastAPI:
    """The app for one worker process, configured by the environment ``scholar-es serve`` set;
    the worker exits when the master that started it dies."""
    from scholar_es.serve.parent import MASTER_PID_ENV, exit_with_parent

    if os.environ.get(MASTER_PID_ENV):
        exit_with_parent(int(os.environ[MASTER_PID_ENV]))
    # a scroll or point in time lives in the worker that opened it; the next request may reach another
    contexts.refuse(
        "scroll and point in time need `scholar-es serve --workers 1`: this server runs several worker "
        "processes and a search context lives in the one that opened it, which the next request may not reach"
    )
    in_flight = os.environ.get("SCHOLAR_ES_SERVE_MAX_IN_FLIGHT")
    state = open_state(
        os.environ["SCHOLAR_ES_SERVE_TARGET"],
        model=os.environ.get("SCHOLAR_ES_SERVE_MODEL") or None,
        api_key=api_key_from_env(),
        max_body=int(os.environ.get("SCHOLAR_ES_SERVE_MAX_BODY") or DEFAULT_MAX_BODY),
        profile=os.environ.get("SCHOLAR_ES_SERVE_PROFILE") or None,
        max_in_flight=int(in_flight) if in_flight else None,
    )
    return create_app(state)
