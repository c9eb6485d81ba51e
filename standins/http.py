"""HTTP plumbing shared by the local Kubernetes stand-ins: the recorded-cluster stand-in
(`standins.apiserver`) and the simulated cluster (`standins.simulator`). Stdlib only, no Django.

- `ThreadedServer`: a threading HTTP server on 127.0.0.1 that can cut its kept-alive connections when it stops;
- `KubernetesHandler`: answers as the API server does (keep-alive, Content-Length, `Status` objects for errors);
- `continue_token` / `read_continue_token`: opaque list tokens (base64 JSON), checked against the list they continue;
- `kubeconfig` / `write_kubeconfig`: a kubeconfig with a bearer token for a plain-http server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "EXPIRED_MESSAGE",
    "PROMETHEUS_TEXT",
    "KubernetesHandler",
    "ThreadedServer",
    "continue_token",
    "kubeconfig",
    "read_continue_token",
    "write_kubeconfig",
]

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
# The real API server's words for an expired continue token (HTTP 410, reason Expired).
EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


class ThreadedServer(ThreadingHTTPServer):
    """One thread per connection; `close_connections()` ends kept-alive ones so their threads stop waiting."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End kept-alive connections, so their handler threads stop waiting for another request."""
        with self._open_lock:
            open_now = list(self._open)
        for connection in open_now:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)


class KubernetesHandler(BaseHTTPRequestHandler):
    """Answers shaped like the API server's: HTTP/1.1 keep-alive, every body with its Content-Length."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # test and benchmark output stays readable
        return

    def _status(self, code: int, reason: str, message: str, metadata: dict[str, Any] | None = None) -> None:
        """A `kind: Status` failure, as the API server words its errors."""
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": metadata or {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        self._json(code, body)

    def _json(self, code: int, body: Any) -> None:
        self._raw(code, "application/json", json.dumps(body).encode())

    def _raw(self, code: int, content_type: str, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def continue_token(fields: Mapping[str, Any]) -> str:
    """An opaque continue token carrying `fields` (JSON values)."""
    return base64.urlsafe_b64encode(json.dumps(dict(fields), sort_keys=True).encode()).decode()


def read_continue_token(token: str, expected: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a token made by `continue_token`. Raises ValueError when it is not one, or when any of
    `expected`'s fields differ (a token of another list: other resource or selector)."""
    try:
        fields = json.loads(base64.urlsafe_b64decode(token.encode()))
    except ValueError as error:
        raise ValueError(f"{token!r} is not one of this server's tokens") from error
    if not isinstance(fields, dict) or not isinstance(fields.get("start"), int):
        raise ValueError(f"{token!r} is not one of this server's tokens")
    if any(fields.get(key) != value for key, value in expected.items()):
        raise ValueError("the token belongs to a different list")
    return fields


def kubeconfig(url: str, token: str, name: str = "standin") -> dict[str, Any]:
    """A kubeconfig (as a dict) pointing at a plain-http server with a bearer token."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def write_kubeconfig(path: str | Path, url: str, token: str, name: str = "standin") -> Path:
    """Write `kubeconfig(url, token, name)` as YAML; returns the path."""
    path = Path(path)
    path.write_text(yaml.safe_dump(kubeconfig(url, token, name), sort_keys=False))
    return path
