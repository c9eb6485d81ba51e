"""A real HTTP server on 127.0.0.1 that records what the agent pushes, for the agent's tests."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class IngestServer:
    """A local HTTP server answering each POST with the next scripted status ("hang": never answer in time)."""

    script: list[int | str] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def next_answer(self) -> int | str:
        return self.script.pop(0) if self.script else 200


@pytest.fixture
def ingest_server() -> Iterator[IngestServer]:
    state = IngestServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append(Recorded(self.path, dict(self.headers.items()), body))
            answer = state.next_answer()
            if answer == "hang":
                state.release.wait(10)
                return
            status = int(answer)
            reply = json.dumps({"accepted": status == 200}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
