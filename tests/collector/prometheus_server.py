"""A real Prometheus for tests: Debian's `/usr/bin/prometheus` on a free loopback port with a temporary config and
data directory, scraping a local exporter thread that plays recorded cAdvisor and kube-state-metrics text.

The recorded cAdvisor text carries its capture's sample timestamps (November 2025). Prometheus drops samples that
far behind its head ("Error on ingesting samples that are too old or are too far into the future", every timestamped
sample of the scrape), so the exporter stamps each served sample with the instant it serves it — what a live kubelet
does with its stats time — and leaves untimed lines (the `container_spec_*` families) untimed, as cAdvisor does.
Prometheus keeps the exporter's stamps (`honor_timestamps`, its default), so a test can tell which served body every
stored sample came from: `CadvisorPlayback.served` maps each stamp to how many times the text had been served.

Prometheus 2.42 (Debian bookworm) applies the configured targets about 5 s after it starts — its discovery manager
sends updates at most every 5 s, a delay that version cannot shorten — so a server costs ~6 s before its first scrape
and tests should share one where they can.

Counters advance by a known step per serve: the n-th body (n = 0, 1, 2, …) reports every container's CFS and usage
counters as recorded + n × step, so expected deltas are exact.

    exporter = Exporter({"/metrics/cadvisor": playback.render, "/metrics": lambda: ksm_bytes})
    with exporter, PrometheusServer(tmp_path, {"cadvisor": exporter.url("/metrics/cadvisor")}) as prom:
        prom.wait_for("container_cpu_usage_seconds_total")
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import yaml

PROMETHEUS_BINARY = Path(os.environ.get("CPUTUNE_PROMETHEUS_BINARY", "/usr/bin/prometheus"))
_PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def require_prometheus() -> Path:
    """The Prometheus binary, or skip the test saying how to get it (CI installs Debian's `prometheus` package)."""
    if not (PROMETHEUS_BINARY.is_file() and os.access(PROMETHEUS_BINARY, os.X_OK)):
        pytest.skip(
            f"needs a Prometheus server binary at {PROMETHEUS_BINARY} (apt-get install prometheus, "
            "or set CPUTUNE_PROMETHEUS_BINARY)"
        )
    return PROMETHEUS_BINARY


# ---------------------------------------------------------------------------------------------------- the exporter


@dataclass(frozen=True)
class Steps:
    """What each container's counters gain per serve. Binary fractions, so float sums stay exact."""

    periods: int = 10
    throttled_periods: int = 3
    throttled_seconds: float = 0.25
    usage_seconds: float = 0.5
    pressure_waiting_seconds: float = 0.125
    pressure_stalled_seconds: float = 0.0625


_STEP_FAMILIES = {
    "container_cpu_cfs_periods_total": "periods",
    "container_cpu_cfs_throttled_periods_total": "throttled_periods",
    "container_cpu_cfs_throttled_seconds_total": "throttled_seconds",
    "container_cpu_usage_seconds_total": "usage_seconds",
    "container_pressure_cpu_waiting_seconds_total": "pressure_waiting_seconds",
    "container_pressure_cpu_stalled_seconds_total": "pressure_stalled_seconds",
}
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _labels(block: str) -> dict[str, str]:
    return dict(_LABEL.findall(block))


@dataclass
class _Line:
    head: str  # `name{labels}`
    value: str
    timed: bool
    step_field: str  # the Steps field this line advances by, or ""
    base: float


class CadvisorPlayback:
    """A recorded `/metrics/cadvisor` text served as a live kubelet would: fresh timestamps, advancing counters.

    Only container-level lines advance (a pod and a container other than "" and "POD"), and of the usage family only
    the `cpu="total"` (or cpu-less) series, so a container's stored usage gains exactly one step per serve.
    """

    def __init__(self, text: str, steps: Steps | None = None) -> None:
        self.steps = steps or Steps(0, 0, 0.0, 0.0)
        self.lines: list[_Line | str] = []
        for raw in text.splitlines():
            if not raw or raw.startswith("#"):
                self.lines.append(raw)
                continue
            close = raw.rfind("}")
            head, tail = (
                (raw[: close + 1], raw[close + 1 :]) if close >= 0 else (raw.split()[0], raw[len(raw.split()[0]) :])
            )
            fields = tail.split()
            name = head.split("{", 1)[0]
            labels = _labels(head[len(name) :])
            step_field = ""
            container = labels.get("container", labels.get("container_name", ""))
            pod = labels.get("pod", labels.get("pod_name", ""))
            if (
                name in _STEP_FAMILIES
                and pod
                and container not in ("", "POD")
                and labels.get("cpu", "total") == "total"
            ):
                step_field = _STEP_FAMILIES[name]
            self.lines.append(_Line(head, fields[0], len(fields) > 1, step_field, float(fields[0])))
        # Whether the recording stamps its samples (then every served body is identified by its stamp).
        self.timed = any(isinstance(line, _Line) and line.timed for line in self.lines)
        self._lock = threading.Lock()
        self.serves = 0
        self.served: dict[int, int] = {}  # sample timestamp in ms → n (the n-th serve, from 0)
        self._last_ms = 0

    def render(self) -> bytes:
        """The next body: counters advanced once more, samples stamped now (recorded in `served`)."""
        with self._lock:
            n = self.serves
            self.serves += 1
            ts_ms = max(int(time.time() * 1000), self._last_ms + 1)
            self._last_ms = ts_ms
            self.served[ts_ms] = n
        return self.body(n, ts_ms)

    def body(self, n: int, ts_ms: int) -> bytes:
        """The n-th body as served with stamp `ts_ms` (the same bytes `render` gave, for a test to parse again)."""
        out: list[str] = []
        for line in self.lines:
            if isinstance(line, str):
                out.append(line)
                continue
            value = line.value
            if line.step_field and n:
                value = repr(self.expected(line.base, line.step_field, n))
            out.append(f"{line.head} {value} {ts_ms}" if line.timed else f"{line.head} {value}")
        return ("\n".join(out) + "\n").encode()

    def expected(self, base: float, step_field: str, n: int) -> float | int:
        """The value a line recorded as `base` has in the n-th served body."""
        step = getattr(self.steps, step_field)
        total = base + n * step
        return int(total) if isinstance(step, int) and float(base).is_integer() else total

    def containers(self) -> set[tuple[str, str, str]]:
        """(namespace, pod, container) of every container whose counters advance."""
        keys = set()
        for line in self.lines:
            if isinstance(line, _Line) and line.step_field:
                labels = _labels(line.head)
                keys.add(
                    (
                        labels["namespace"],
                        labels.get("pod", labels.get("pod_name", "")),
                        labels.get("container", labels.get("container_name", "")),
                    )
                )
        return keys

    def recorded(self, family: str, namespace: str, pod: str, container: str) -> float:
        """The recorded value of one container's series (usage: the cpu="total" one), read from the text."""
        for line in self.lines:
            if isinstance(line, str) or not line.head.startswith(family + "{"):
                continue
            labels = _labels(line.head[len(family) :])
            if (
                labels.get("namespace") == namespace
                and labels.get("pod", labels.get("pod_name")) == pod
                and labels.get("container", labels.get("container_name")) == container
                and labels.get("cpu", "total") == "total"
            ):
                return line.base
        raise KeyError(f"no {family} line for {namespace}/{pod}/{container}")


# A route answers bytes (200, exposition text) or (status, content type, bytes).
Route = Callable[[], "bytes | tuple[int, str, bytes]"]


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Exporter:
    """A threaded HTTP server on 127.0.0.1:<free port> answering each path (GET or POST) with its route.

    `routes` may be changed while it runs (a test swaps a body); every request is kept in `requests`.
    """

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = dict(routes)
        self.requests: list[SeenRequest] = []
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                path = urllib.parse.urlsplit(self.path).path
                exporter.requests.append(SeenRequest(self.command, path, dict(self.headers), self.rfile.read(length)))
                route = exporter.routes.get(path)
                answer = route() if route is not None else (404, "text/plain", b"not found\n")
                status, content_type, body = answer if isinstance(answer, tuple) else (200, _PROMETHEUS_TEXT, answer)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="test-exporter", daemon=True)

    def url(self, path: str) -> str:
        port = self.server.server_address[1]
        return f"http://127.0.0.1:{port}{path}"

    def __enter__(self) -> Exporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# ------------------------------------------------------------------------------------------------- the Prometheus


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    """`prometheus` scraping `jobs` (job name → URL) every `scrape_interval_s`; stopped and its data removed on exit.

    `target_labels` adds labels to a job's target (e.g. a `node` label, as kubelet scrape configs often relabel in).
    """

    def __init__(
        self,
        work_dir: Path,
        jobs: dict[str, str],
        *,
        scrape_interval_s: float = 1.0,
        target_labels: dict[str, dict[str, str]] | None = None,
        start_timeout_s: float = 15.0,
    ) -> None:
        self.binary = require_prometheus()
        self.work_dir = work_dir / "prometheus"
        self.jobs = jobs
        self.scrape_interval_s = scrape_interval_s
        self.target_labels = target_labels or {}
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _config(self) -> dict[str, Any]:
        interval = f"{int(self.scrape_interval_s * 1000)}ms"
        scrape_configs = []
        for job, url in self.jobs.items():
            parts = urllib.parse.urlsplit(url)
            target: dict[str, Any] = {"targets": [parts.netloc]}
            if job in self.target_labels:
                target["labels"] = self.target_labels[job]
            scrape_configs.append(
                {
                    "job_name": job,
                    "metrics_path": parts.path,
                    "scheme": parts.scheme,
                    "honor_labels": True,  # kube-state-metrics' own namespace/pod labels win, as in real setups
                    "static_configs": [target],
                }
            )
        return {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": "1m"},
            "scrape_configs": scrape_configs,
        }

    def __enter__(self) -> PrometheusServer:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self._config(), sort_keys=False))
        self.log_path = self.work_dir / "prometheus.log"
        for _attempt in range(3):  # another process may take the free port between bind and Prometheus' listen
            self.port = free_port()
            with self.log_path.open("wb") as log:
                self.process = subprocess.Popen(
                    [
                        str(self.binary),
                        f"--config.file={config}",
                        f"--storage.tsdb.path={self.work_dir / 'data'}",
                        f"--web.listen-address=127.0.0.1:{self.port}",
                        "--storage.tsdb.retention.time=1d",
                        "--log.level=warn",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.work_dir,
                )
            if self._wait_ready():
                return self
            self._stop()
        raise RuntimeError(f"Prometheus did not become ready; its log ends with:\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()
        shutil.rmtree(self.work_dir / "data", ignore_errors=True)

    def _stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- asking it

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}{'?' + query if query else ''}", timeout=5) as response:
            return json.load(response)

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        answer = self.api("/api/v1/query", **params)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def wait_for_targets(self, timeout_s: float = 15.0) -> None:
        """Until every job's target is up (scraped successfully at least once)."""
        deadline = time.monotonic() + timeout_s
        health: dict[str, str] = {}
        while time.monotonic() < deadline:
            targets = self.api("/api/v1/targets")["data"]["activeTargets"]
            health = {t["labels"]["job"]: f"{t['health']} {t['lastError']}".strip() for t in targets}
            if len(health) == len(self.jobs) and all(h == "up" for h in health.values()):
                return
            time.sleep(0.1)
        raise AssertionError(f"targets not up within {timeout_s} s: {health}; log:\n{self.log_tail()}")

    def wait_for(self, promql: str, count: int = 1, timeout_s: float = 15.0) -> list[dict[str, Any]]:
        """Until `promql` answers at least `count` samples."""
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if len(result) >= count:
                return result
            time.sleep(0.1)
        raise AssertionError(f"{promql!r} gave {len(result)} samples within {timeout_s} s; log:\n{self.log_tail()}")
