"""A TCP proxy for fault injection: it forwards bytes both ways and can cut connections at
chosen moments (``tests/reliability/test_postgres_drop.py``).

``cut_after(marker)`` arms the proxy: the next time a client sends bytes containing
``marker`` they are still forwarded to the server, but the server's answer is thrown away and
both sockets are closed, so the client cannot know whether the server acted on them (a
commit that landed while its acknowledgement was lost). ``cut_before(marker)`` closes the
connection instead of forwarding. ``refuse`` makes new connections fail at once.
"""

from __future__ import annotations

import select
import socket
import threading
from typing import Any


class Proxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.marker: bytes | None = None
        self.forward_marker = True
        self.refuse = False
        self.cuts = 0
        self.seen: list[bytes] = []
        self._closing = False
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    # -- arming -----------------------------------------------------------------------

    def cut_after(self, marker: bytes) -> None:
        with self.lock:
            self.marker, self.forward_marker = marker, True

    def cut_before(self, marker: bytes) -> None:
        with self.lock:
            self.marker, self.forward_marker = marker, False

    def drop_all(self, *, refuse: bool) -> None:
        """Close every open connection; with ``refuse``, refuse new ones until told otherwise."""
        self.refuse = refuse
        for pair in list(self._pairs):
            for sock in pair:
                _close(sock)
        self._pairs.clear()

    def close(self) -> None:
        self._closing = True
        self.listener.close()
        for pair in list(self._pairs):
            for sock in pair:
                _close(sock)

    # -- the plumbing -----------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refuse:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.target)
            except OSError:
                _close(client)
                continue
            self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        doomed = False
        try:
            while True:
                try:
                    ready, _, _ = select.select([client, server], [], [], 1.0)
                except (ValueError, OSError):
                    return  # a socket was closed under us (the proxy or the test cut it)
                if self._closing:
                    return
                for sock in ready:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    if sock is client:
                        with self.lock:
                            hit = self.marker is not None and self.marker in data
                            if hit:
                                self.marker = None
                                self.cuts += 1
                                self.seen.append(data)
                        if hit and not self.forward_marker:
                            return  # closed before the server saw it
                        server.sendall(data)
                        doomed = doomed or hit
                    elif doomed:
                        return  # the server's answer is lost with the connection
                    else:
                        client.sendall(data)
        except OSError:
            return
        finally:
            _close(client)
            _close(server)


def _close(sock: Any) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
