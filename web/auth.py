"""The access token: every request needs it, and a write needs it in a header from the same origin.

The token comes in the URL the server prints (``?token=...``); the first page visit moves it into an HttpOnly,
SameSite=Strict cookie and redirects to the same URL without it, so it leaves the address bar and the history.
After that the cookie carries it; scripts may send it as ``X-Sessiontree-Token`` or ``Authorization: Bearer``. A
request without it gets 401 and no data. A write (any method but GET/HEAD) must carry the token in a header (a
cross-site form cannot set one) and, when the browser names an Origin, come from this server's own origin.

Before any of that, the ``Host`` header must name this machine (``127.0.0.1``, ``localhost``, ``[::1]``), the
``--host`` given, or the address the connection arrived on, with or without a port. A DNS-rebinding page (a name of
the attacker's that resolves to 127.0.0.1 after the page loaded) sends its own name as the Host, so it is refused
(``421``) before the token is even looked at.
"""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import parse_qsl, urlencode

HEADER = "x-sessiontree-token"
READS = frozenset({"GET", "HEAD"})
DENIED = b"401 Unauthorized: this sessiontree server needs the access token it printed when it started (its URL).\n"
MISDIRECTED = (b"421 Misdirected Request: this sessiontree server answers only requests addressed to this machine "
               b"(127.0.0.1, localhost) or to the --host it was started with.\n")
LOCAL_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
FORBIDDEN = b"403 Forbidden: a write needs the access token in the X-Sessiontree-Token header, from this server's own pages.\n"


def cookie_name(port: int | None) -> str:
    """Per port: two servers on one host would otherwise overwrite each other's cookie."""
    return f"sessiontree_token_{port or 0}"


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}


def _cookies(header: str) -> dict[str, str]:
    out = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name:
            out[name] = value
    return out


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header, without its port and brackets, lower case (None: not a well-formed one)."""
    header = header.strip().lower()
    if header.startswith("["):  # an IPv6 literal: [::1] or [::1]:8000
        name, bracket, rest = header[1:].partition("]")
        return name if bracket and (rest == "" or (rest[:1] == ":" and rest[1:].isdigit())) else None
    name, colon, port = header.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


class TokenGate:
    """ASGI middleware enforcing the Host and token rules (see the module documentation)."""

    def __init__(self, app: Any, token: str, host: str | None = None) -> None:
        self.app = app
        self.token = token
        given = host_name(host if host is None or ":" not in host or host.startswith("[") else f"[{host}]") if host else None
        self.hosts = LOCAL_NAMES | ({given} if given else set())

    def _host_ok(self, headers: dict[str, str], scope: dict[str, Any]) -> bool:
        name = host_name(headers.get("host", ""))
        if name is None:
            return False
        arrived = (scope.get("server") or (None, None))[0]  # an address literal is no rebinding: a name is needed
        return name in self.hosts or (arrived is not None and name == str(arrived).lower())

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        if not self._host_ok(headers, scope):
            await _plain(send, 421, MISDIRECTED)
            return
        port = (scope.get("server") or (None, None))[1]
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        from_query = next((v for k, v in query if k == "token"), None)
        bearer = headers.get("authorization", "")
        from_header = headers.get(HEADER) or (bearer[7:] if bearer.lower().startswith("bearer ") else None)
        from_cookie = _cookies(headers.get("cookie", "")).get(cookie_name(port))
        if not any(self._ok(t) for t in (from_query, from_header, from_cookie)):
            await _plain(send, 401, DENIED, [(b"www-authenticate", b'Bearer realm="sessiontree"')])
            return
        if scope["method"] not in READS and not (self._ok(from_header) and self._same_origin(headers, scope)):
            await _plain(send, 403, FORBIDDEN)
            return
        path = scope.get("path", "/")
        if from_query is not None and scope["method"] == "GET" and not path.startswith(("/api/", "/static/")):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            cookie = f"{cookie_name(port)}={self.token}; HttpOnly; SameSite=Strict; Path=/"
            location = path + (f"?{rest}" if rest else "")
            await _plain(send, 303, b"", [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode())])
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _same_origin(headers: dict[str, str], scope: dict[str, Any]) -> bool:
        origin = headers.get("origin")
        if origin is None:  # not a browser's cross-origin request (scripts, same-origin GETs)
            return True
        host = headers.get("host", "")
        return origin in (f"http://{host}", f"https://{host}")


async def _plain(send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
