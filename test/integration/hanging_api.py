"""A Kubernetes API server that never answers, for a kubernetes store that hangs.

Used by test_store_stall.py and by the `stall` scenario of bench/http/run.py (which loads
this file by its path: bench/http/stall.py). Standard library only, and nothing from the
test fixtures, so that both can import it."""

import socket
import ssl
import threading


class HangingApiServer:
    """A stand-in Kubernetes API server on 127.0.0.1 that accepts TCP, completes TLS with the
    given certificate (the test and bench server certificates carry the IP SAN 127.0.0.1, so
    store.caFile is their CA) and then never answers: it reads and discards whatever arrives
    and keeps the connection open until stop(). Counts connections, completed handshakes and
    the request lines it saw."""

    def __init__(self, cert, key, backlog=256):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(cert), str(key))
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.handshakes = 0
        self.requests = []          # "METHOD /path" of each request head seen
        self._conns = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            threading.Thread(target=self._hang, args=(conn,), daemon=True).start()

    def _hang(self, raw):
        try:
            raw.settimeout(10)
            tls = self.ctx.wrap_socket(raw, server_side=True)
        except OSError:
            return
        with self._lock:
            self.handshakes += 1
            self._conns.append(tls)
        tls.settimeout(0.5)
        while not self._stop.is_set():
            try:
                data = tls.recv(65536)
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            if not data:
                return
            for line in data.split(b"\r\n"):
                parts = line.split(b" ")
                if len(parts) == 3 and parts[2].startswith(b"HTTP/1.") and parts[0].isalpha():
                    with self._lock:
                        self.requests.append(f"{parts[0].decode()} {parts[1].decode(errors='replace')}")

    def stop(self):
        """Closes the listener and every connection: store calls blocked on it fail now."""
        self._stop.set()
        try:
            self.sock.close()
        except OSError:
            pass
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.close()
            except OSError:
                pass
