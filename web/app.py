"""The viewer's ASGI application: the pages, the JSON endpoints and the static files, behind the token gate."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from sessiontree.web import api, pages, search
from sessiontree.web.auth import TokenGate
from sessiontree.web.sessions import OpenSessions


def static_folder() -> Path:
    return Path(str(resources.files("sessiontree.web").joinpath("static")))


def create_app(sessions: OpenSessions, token: str, host: str | None = None, *, allow_writes: bool = False) -> TokenGate:
    """The application serving ``sessions`` to whoever has ``token``, addressed as this machine or ``host``; pi's
    sessions are read-only unless ``allow_writes``."""
    static = Mount("/static", StaticFiles(directory=static_folder()), name="static")
    app = Starlette(routes=[*pages.ROUTES, *api.ROUTES, *search.ROUTES, static])
    app.state.sessions = sessions
    app.state.token = token
    app.state.allow_writes = allow_writes
    return TokenGate(app, token, host)
