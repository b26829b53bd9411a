"""``sessiontree serve``: bind, print the URL with its token (the first line on stdout), open the browser, serve."""

from __future__ import annotations

import errno
import secrets
import socket
import sys
import threading
import webbrowser
from typing import Any

from sessiontree.cli.output import CliError, warn
from sessiontree.web.app import create_app
from sessiontree.web.sessions import OpenSessions

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: a free port); a taken port or a bad host is a clear error."""
    if not 0 <= port <= 65535:
        raise CliError(f"--port must be 0..65535, not {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {port} on {host} is already in use (choose another with --port, or --port 0 for any free one)",
                           code="port_in_use") from None
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(repo: str | None, host: str, port: int, open_browser: bool, *, keep: int = 16, allow_writes: bool = False) -> int:
    import uvicorn

    sessions = OpenSessions(repo, keep=keep)  # a missing repository fails here, before anything is printed
    token = secrets.token_urlsafe(24)
    sock = bind(host, port)
    link = f"{address(sock)}/?token={token}"
    sys.stdout.write(link + "\n")
    sys.stdout.flush()
    if host not in LOOPBACK:
        warn(f"listening on {host}: other machines can reach this server (anyone with the token can read the sessions)")
    app = create_app(sessions, token, host, allow_writes=allow_writes)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if open_browser:
        threading.Timer(0.3, _open, (link,)).start()
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # Ctrl-C is how a server is stopped: not an error (uvicorn raises it again after its shutdown)
        pass
    finally:
        sock.close()
        sessions.close()
    return 0


def _open(link: str) -> Any:
    try:
        return webbrowser.open(link)
    except Exception:  # no browser here: the URL is printed already
        return False
