"""The access token: every request needs it, and a write needs it in a header from the same origin.

The token comes in the URL the server prints (``?token=...``); the first page visit moves it into an HttpOnly,
SameSite=Strict cookie and redirects to the same URL without it, so it leaves the address bar and the history.
After that the cookie carries it; scripts may send it as ``X-Sessiontree-Token`` or ``Authorization: Bearer``. A
request without it gets 401 and no data. A write (any method but GET/HEAD) must carry the token in a header (a
cross-site form cannot set one) and, when the browser names an Origin, come from this server's own origin.
"""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import parse_qsl, urlencode

HEADER = "x-sessiontree-token"
READS = frozenset({"GET", "HEAD"})
DENIED = b"401 Unauthorized: this sessiontree server needs the access token it printed when it started (its URL).\n"
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


class TokenGate:
    """ASGI middleware enforcing the token rule (see the module documentation)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
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
