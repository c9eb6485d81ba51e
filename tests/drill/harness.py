"""Machinery for the fault drills: a production-shaped install in miniature, built from scratch per test session.

- `PrivateRedis`, `PrivatePostgres`: servers of their own on free ports (never the machine's shared ones), which a
  drill may stop, crash and restart; always removed in teardown.
- `SteppedClock`, `FaultProxy`: the simulated cluster (standins/simulator.py) serves counters that depend only on a
  clock the test steps once per cycle, so two installs collecting the same cycles store the same samples. The
  collector reaches it through a proxy that injects faults: list answers of 500 or silence, kubelets that hang or
  are held until the test lets them go.
- `CeleryProcess`: a real prefork worker (or a beat) as a subprocess on the private Redis and PostgreSQL.
- `DrillDatabase`: reads a drill's database with psycopg directly; `Dump` is what it stored, comparable between a
  run with a fault and one without; `series_problems` / `head_problems` check a dump against its own counters.

Every wait has a deadline and raises `DrillTimeout` with the worker's log tail: a drill fails, it never hangs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import math
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import psycopg

from apps.collector.cadvisor import parse_cadvisor
from standins.http import KubernetesHandler, ThreadedServer
from standins.simulator import SimulatedCluster, SimulatorConfig, SimulatorServer

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")

CLUSTER_NAME = "drill"
CYCLE_STEP_S = 60.0  # simulated seconds between two cycles: cAdvisor's stats instants (every 10 s) all move on
NODE_TIMEOUT_S = 3  # CPUTUNE_NODE_TIMEOUT in the drills: a hanging kubelet costs 3 s, not the default 20
# The drill cluster: small enough for 2 cores, large enough that a node task is one of several in flight.
# Faults come from the proxy, per drill, not from the simulator's own fractions.
SIM_CONFIG = SimulatorConfig(
    nodes=6,
    pods_per_node=8,
    containers_per_pod=2,
    seed=11,
    restart_fraction=0.0,
    slow_fraction=0.0,
    failing_fraction=0.0,
    hanging_fraction=0.0,
)
CONTAINERS = SIM_CONFIG.nodes * SIM_CONFIG.pods_per_node * SIM_CONFIG.containers_per_pod


def _pod_cgroups_with_quota() -> int:
    """The drill cluster's pod cgroups with a pod-level quota, as its scrapes show them (parsed by the product's
    parser): the ingest stores each beside the containers."""
    sim, now = SimulatedCluster(SIM_CONFIG), time.time()
    return sum(
        len(
            parse_cadvisor(sim.scrape(n, now), node=sim.node_name(n), default_ts=datetime.now(UTC)).pod_quota_readings()
        )
        for n in range(SIM_CONFIG.nodes)
    )


# The samples one complete cycle stores: one per container and one per pod cgroup with a quota.
SERIES = CONTAINERS + _pod_cgroups_with_quota()


class DrillTimeout(AssertionError):
    """Something a drill waited for did not happen before its deadline."""


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str, *, every_s: float = 0.1) -> T:
    """Poll `predicate` until it returns something truthy (returned); DrillTimeout naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DrillTimeout(f"{what}: not within {timeout_s:g} s")
        time.sleep(every_s)


def free_port() -> int:
    """A TCP port nothing listens on right now (the kernel's pick for an ephemeral bind)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop_process(proc: subprocess.Popen[Any] | None, *, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Stop a process started with start_new_session=True: `sig`, then SIGKILL to its whole group."""
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the pool children or forks it left behind
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ------------------------------------------------------------------------------------------------------ Redis


class PrivateRedis:
    """A redis-server of the drill's own on a free port, persistent as the install's (docker-compose.yml): an
    append-only file, fsynced every second, in its own folder, so a restart keeps what was queued."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.log = workdir / f"redis-{self.port}.log"
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir(exist_ok=True)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                 "--appendfsync", "everysec", "--dir", str(self.dir), "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        wait_until(self.ping, 15, f"redis-server on port {self.port} answering PING")
        return self

    def ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
        return False

    def command(self, *words: str) -> bytes:
        """One command in the inline protocol (words without spaces); the raw first answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(" ".join(words).encode() + b"\r\n")
            return conn.recv(65536)

    def stop(self) -> None:
        _stop_process(self._proc, grace_s=5)
        self._proc = None

    def restart(self, down_s: float = 1.0) -> None:
        """Stop, stay down `down_s`, start again on the same port: every connection breaks; queues come back from the
        append-only file."""
        self.stop()
        time.sleep(down_s)
        self.start()


# ------------------------------------------------------------------------------------------------- PostgreSQL


def postgres_bin() -> Path | None:
    """Debian's newest PostgreSQL server binaries (/usr/lib/postgresql/N/bin), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


class PrivatePostgres:
    """A PostgreSQL cluster of the drill's own: initdb in a temporary folder owned by the `postgres` OS user (the
    server refuses to run as root), trust authentication, 127.0.0.1 on a free port. `destroy()` removes it all."""

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
        self.bin = bin_dir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="cputune-drill-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._owner = pwd.getpwnam("postgres")
        os.chown(self.dir, self._owner.pw_uid, self._owner.pw_gid)

    def _run(self, *args: str, timeout_s: float = 60) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}\n"
                               f"{log_tail(self.log)}")  # fmt: skip

    def init(self) -> PrivatePostgres:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        return self.start()

    def start(self) -> PrivatePostgres:
        # fsync off: the drills crash the server, never the machine, and the OS keeps what was written. Commits
        # stay synchronous: with synchronous_commit off a crash loses transactions the clients saw committed.
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=60")  # fmt: skip
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects clients and shuts down cleanly; `immediate` is a crash (recovery on the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "-m", mode, "stop")

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database (a copy of `template` when given: a migrated schema in a tenth of a second)."""
        self.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)


# ----------------------------------------------------------------------------------------- the simulated cluster


@dataclass
class SteppedClock:
    """The simulator's "now" (Unix seconds): moved only by the test, so the served counters depend on nothing else
    — unless `run()` lets it advance with the wall clock (for cycles started by beat, not by the test)."""

    now_s: float
    running_since: float | None = None  # time.monotonic() when run() was called

    def __call__(self) -> float:
        if self.running_since is None:
            return self.now_s
        return self.now_s + (time.monotonic() - self.running_since)

    def run(self) -> None:
        self.running_since = time.monotonic()


def simulation_base_s() -> float:
    """The session's simulated t0: two hours ago on the hour (recent, so retention and partitions behave)."""
    return math.floor(time.time() / 3600) * 3600 - 2 * 3600


def cycle_instant(base_s: float, cycle: int) -> float:
    """The simulated instant of cycle `cycle` (1, 2, …)."""
    return base_s + 600 + cycle * CYCLE_STEP_S


@dataclass
class ProxyFaults:
    """What the proxy breaks; read on every request, so a test changes it while the workers run."""

    list_status: dict[str, int] = field(default_factory=dict)  # "nodes"/"pods" → HTTP status of the list
    list_hang_s: dict[str, float] = field(default_factory=dict)  # "nodes"/"pods" → seconds without an answer
    scrape_hang_s: dict[str, float] = field(default_factory=dict)  # node → seconds its scrape gets no answer
    held: dict[str, threading.Event] = field(default_factory=dict)  # node → its next scrape waits for the event


class FaultProxy:
    """A fault-injecting HTTP proxy in front of the simulator (the API server the collector talks to)."""

    HOLD_MAX_S = 60.0

    def __init__(self, upstream: str, token: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.token = token
        self.faults = ProxyFaults()
        self.scrapes: Counter[str] = Counter()  # scrape requests received per node
        self.lists: Counter[str] = Counter()
        self._in_flight: dict[str, set[int]] = {}  # node → client ports of its scrapes being answered
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _ProxyServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FaultProxy:
        server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        server.proxy = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        for event in list(self.faults.held.values()):
            event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        assert self._server is not None, "use the proxy as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- faults

    def hold_next_scrape(self, node: str) -> None:
        """The node's next scrape waits (at most HOLD_MAX_S) until `release(node)`; later scrapes pass."""
        self.faults.held[node] = threading.Event()

    def release(self, node: str) -> None:
        event = self.faults.held.pop(node, None)
        if event is not None:
            event.set()

    def in_flight(self, node: str) -> set[int]:
        """Client ports of the node's scrapes the proxy is answering (or holding) right now."""
        with self._lock:
            return set(self._in_flight.get(node, ()))

    # -- the handler's side

    def _scrape_started(self, node: str, port: int) -> threading.Event | None:
        with self._lock:
            self.scrapes[node] += 1
            self._in_flight.setdefault(node, set()).add(port)
        return self.faults.held.get(node)

    def _scrape_done(self, node: str, port: int) -> None:
        with self._lock:
            self._in_flight.get(node, set()).discard(port)


class _ProxyServer(ThreadedServer):
    proxy: FaultProxy


class _ProxyHandler(KubernetesHandler):
    server: _ProxyServer

    def do_GET(self) -> None:
        proxy = self.server.proxy
        path = unquote(urlsplit(self.path).path)
        try:
            if path in ("/api/v1/nodes", "/api/v1/pods"):
                resource = path.rsplit("/", 1)[1]
                proxy.lists[resource] += 1
                hang_s = proxy.faults.list_hang_s.get(resource, 0.0)
                if hang_s:
                    proxy._stopping.wait(hang_s)
                    self.close_connection = True
                    return
                status = proxy.faults.list_status.get(resource)
                if status is not None:
                    self._status(status, "InternalError", f"drill: the API server answers {status} for {resource}")
                    return
                self._forward()
                return
            parts = path.split("/")  # /api/v1/nodes/<node>/proxy/metrics/cadvisor
            if len(parts) >= 7 and parts[3] == "nodes" and parts[5] == "proxy":
                self._scrape(parts[4])
                return
            self._forward()
        except (BrokenPipeError, ConnectionResetError):  # the collector gave up (its timeout) or was killed
            return

    def _scrape(self, node: str) -> None:
        proxy = self.server.proxy
        port = int(self.client_address[1])
        held = proxy._scrape_started(node, port)
        try:
            if held is not None:
                held.wait(FaultProxy.HOLD_MAX_S)
            hang_s = proxy.faults.scrape_hang_s.get(node, 0.0)
            if hang_s:
                proxy._stopping.wait(hang_s)
                self.close_connection = True
                return
            self._forward()
        finally:
            proxy._scrape_done(node, port)

    def _forward(self) -> None:
        proxy = self.server.proxy
        upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "accept")}
            upstream.request("GET", self.path, headers=headers)
            answer = upstream.getresponse()
            body = answer.read()
            extra = {"Content-Encoding": answer.getheader("Content-Encoding", "")}
            self._raw(answer.status, answer.getheader("Content-Type", "text/plain"), body,
                      {k: v for k, v in extra.items() if v})  # fmt: skip
        finally:
            upstream.close()


@contextlib.contextmanager
def simulated_cluster(base_s: float) -> Iterator[tuple[SteppedClock, SimulatorServer, FaultProxy]]:
    """The drill cluster served on a stepped clock, behind a fault proxy."""
    clock = SteppedClock(cycle_instant(base_s, 0))
    cluster = SimulatedCluster(dataclasses.replace(SIM_CONFIG, start_s=base_s))
    with SimulatorServer(cluster, clock=clock) as server, FaultProxy(server.url, server.token) as proxy:
        yield clock, server, proxy


# ------------------------------------------------------------------------------------------ worker and beat


def drill_env(database_url: str, redis_url: str, **overrides: str) -> dict[str, str]:
    """The environment of an install on the private services (the machine's DATABASE_URL / REDIS_URL replaced)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CPUTUNE_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="cputune.settings",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        DEBUG="1",
        SECRET_KEY="drill-only-not-secret",
        PYTHONPATH=str(ROOT),
        LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",  # the logs the drills read (and show on failure) are up to date
        CPUTUNE_NODE_TIMEOUT=str(NODE_TIMEOUT_S),
        # Node tasks expire after 0.9 × the interval: long enough that no drill's task expires in the queue.
        CPUTUNE_COLLECT_INTERVAL="3600",
        CPUTUNE_DISABLE_SCHEDULES="rollup-hours,retention",
    )
    env.update(overrides)
    return env


def manage(env: dict[str, str], *args: str, timeout_s: float = 120) -> str:
    """`python manage.py …` in a subprocess with `env`; its stdout. Raises with stderr when it fails."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


class CeleryProcess:
    """`celery -A cputune worker -P prefork` (or `beat`) in its own process group, logging to a file."""

    def __init__(
        self, kind: str, env: dict[str, str], workdir: Path, *, name: str = "", concurrency: int = 2,
        supervised: bool = False,
    ) -> None:  # fmt: skip
        self.kind = kind
        # Under cputune.supervise (as `make run` runs its worker): started again when it exits.
        self.supervised = supervised
        self.env = env
        self.name = name or kind
        self.log = workdir / f"{self.name}.log"
        if kind == "worker":
            self.args = ["worker", "-P", "prefork", "-c", str(concurrency), "-n", f"{self.name}@%h",
                         "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
        elif kind == "beat":
            self.args = [
                "beat",
                "-s",
                str(workdir / f"{self.name}-schedule"),
                "--pidfile",
                str(workdir / f"{self.name}.pid"),
            ]
        else:
            raise ValueError(f"kind must be 'worker' or 'beat', got {kind!r}")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, ready_timeout_s: float = 60) -> CeleryProcess:
        return self.launch().wait_ready(ready_timeout_s)

    def launch(self) -> CeleryProcess:
        """Start the process without waiting for it (to start several at the same moment)."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*([sys.executable, "-m", "cputune.supervise"] if self.supervised else []),
                 sys.executable, "-m", "celery", "-A", "cputune", *self.args, "-l", "info"],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    def wait_ready(self, ready_timeout_s: float = 60) -> CeleryProcess:
        marker = " ready." if self.kind == "worker" else "beat: Starting"
        wait_until(lambda: self._running() and marker in self.log.read_text(errors="replace"), ready_timeout_s,
                   f"{self.name} starting\n{log_tail(self.log)}", every_s=0.2)  # fmt: skip
        return self

    def _running(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise DrillTimeout(f"{self.name} exited with {self.proc.returncode}:\n{log_tail(self.log)}")
        return True

    def pool_pids(self) -> list[int]:
        """The worker's pool processes (children of the main process)."""
        if self.proc is None:
            return []
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        with contextlib.suppress(OSError):
            return [int(pid) for pid in children.read_text().split()]
        return []

    def stop(self) -> None:
        _stop_process(self.proc, grace_s=15)

    def tail(self) -> str:
        return log_tail(self.log)


def pid_owning_client_port(port: int, candidates: Iterable[int]) -> int | None:
    """Which of `candidates` holds the TCP socket whose local port is `port` (a connection to the proxy)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return pid
    return None


class Broker:
    """Sends tasks to the private Redis by name, as beat does (the test process's own Celery app points elsewhere)."""

    def __init__(self, redis_url: str) -> None:
        from celery import Celery

        self.app = Celery("cputune-drill", broker=redis_url, set_as_current=False)
        self.app.conf.update(task_serializer="json", broker_connection_retry_on_startup=True)

    def send(self, task: str, *args: object) -> None:
        self.app.send_task(task, args=list(args), retry=True,
                           retry_policy={"max_retries": 20, "interval_start": 0.2, "interval_step": 0.2})  # fmt: skip

    def close(self) -> None:
        self.app.close()


# -------------------------------------------------------------------------------------------- what was stored


@dataclass(frozen=True)
class Run:
    id: int
    status: str
    started_at: datetime
    finished_at: datetime | None
    nodes_total: int
    nodes_ok: int
    nodes_failed: int
    samples_written: int


@dataclass(frozen=True)
class NodeOutcome:
    node: str
    ok: bool
    error: str
    samples_written: int
    seconds_after_start: float


# One stored sample: the container (namespace, pod, container, node), its instant and everything stored with it.
Key = tuple[str, str, str]
SAMPLE_SQL = """
SELECT p.namespace, p.name, c.name, n.name, s.ts, s.periods_total, s.throttled_periods_total,
       s.throttled_seconds_total, s.usage_seconds_total, s.threads, s.interval_s, s.periods_delta,
       s.throttled_periods_delta, s.throttled_seconds_delta, s.usage_seconds_delta, s.reset
FROM telemetry_sample s
JOIN clusters_container c ON c.id = s.container_id
JOIN clusters_pod p ON p.id = c.pod_id
LEFT JOIN clusters_node n ON n.id = p.node_id
"""
HEAD_SQL = """
SELECT p.namespace, p.name, c.name, h.ts, h.periods_total, h.throttled_periods_total, h.throttled_seconds_total,
       h.usage_seconds_total
FROM telemetry_serieshead h
JOIN clusters_container c ON c.id = h.container_id
JOIN clusters_pod p ON p.id = c.pod_id
"""


@dataclass(frozen=True)
class Sample:
    namespace: str
    pod: str
    container: str
    node: str
    ts: datetime
    counters: tuple[Any, Any, Any, Any]  # periods, throttled periods, throttled seconds, usage seconds (totals)
    threads: int | None
    interval_s: float | None
    deltas: tuple[Any, Any, Any, Any]
    reset: bool

    @property
    def key(self) -> Key:
        return (self.namespace, self.pod, self.container)

    @property
    def observation(self) -> tuple[Key, str, datetime, tuple[Any, ...], int | None]:
        """What the scrape said (container, node, instant, counters, threads), without what ingest derived."""
        return (self.key, self.node, self.ts, self.counters, self.threads)


@dataclass
class Dump:
    """Everything a drill's database stored about the cluster's counters."""

    samples: list[Sample]
    heads: dict[Key, tuple[datetime, tuple[Any, ...]]]

    def observations(self) -> set[tuple[Key, str, datetime, tuple[Any, ...], int | None]]:
        return {s.observation for s in self.samples}

    def rows(self) -> set[Sample]:
        return set(self.samples)

    def up_to_instant(self, instant_s: float) -> Dump:
        """The samples at or before the simulated instant (a baseline cut to the cycles a drill ran); no heads."""
        return Dump([s for s in self.samples if s.ts.timestamp() <= instant_s], {})


class DrillDatabase:
    """A drill's database, read with psycopg (a fresh connection per call: the server may have restarted)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def rows(self, sql: str, params: Iterable[object] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return conn.execute(sql, list(params)).fetchall()

    def cluster_id(self) -> int:
        return int(self.rows("SELECT id FROM clusters_cluster WHERE name = %s", [CLUSTER_NAME])[0][0])

    def runs(self) -> list[Run]:
        rows = self.rows(
            "SELECT id, status, started_at, finished_at, nodes_total, nodes_ok, nodes_failed, samples_written "
            "FROM collector_collectionrun ORDER BY id"
        )
        return [Run(*row) for row in rows]

    def node_outcomes(self, run_id: int) -> dict[str, NodeOutcome]:
        rows = self.rows(
            "SELECT n.node, n.ok, n.error, n.samples_written, EXTRACT(EPOCH FROM n.at - r.started_at)::float8 "
            "FROM collector_noderesult n JOIN collector_collectionrun r ON r.id = n.run_id WHERE n.run_id = %s",
            [run_id],
        )
        return {row[0]: NodeOutcome(*row) for row in rows}

    def problems(self, run_id: int) -> list[tuple[str, str]]:
        return [(node, message) for node, message in self.rows(
            "SELECT node, message FROM collector_collectionproblem WHERE run_id = %s ORDER BY id", [run_id])]  # fmt: skip

    def dump(self) -> Dump:
        samples = [
            Sample(ns, pod, container, node or "", ts, (p, tp, tsec, u), threads, interval, (dp, dtp, dtsec, du), reset)
            for ns, pod, container, node, ts, p, tp, tsec, u, threads, interval, dp, dtp, dtsec, du, reset in self.rows(
                SAMPLE_SQL
            )
        ]
        heads = {(ns, pod, c): (ts, (p, tp, tsec, u)) for ns, pod, c, ts, p, tp, tsec, u in self.rows(HEAD_SQL)}
        return Dump(samples, heads)


# --------------------------------------------------------------------------------------------------- the checks


def _series(samples: Iterable[Sample]) -> dict[Key, list[Sample]]:
    series: dict[Key, list[Sample]] = {}
    for sample in samples:
        series.setdefault(sample.key, []).append(sample)
    for rows in series.values():
        rows.sort(key=lambda s: s.ts)
    return series


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


def series_problems(dump: Dump) -> list[str]:
    """Where the stored deltas disagree with the stored counters, recomputed here from the samples alone.

    Each container's first sample has no interval and no deltas; every later one spans exactly the time since the
    previous stored sample, and its deltas are the counters' differences (the new value after a reset). An overlap
    (two samples counting the same seconds), a negative interval or delta, or a sample counted twice shows here.
    """
    problems: list[str] = []
    for key, rows in _series(dump.samples).items():
        previous: Sample | None = None
        for sample in rows:
            where = f"{'/'.join(key)} at {sample.ts.isoformat()}"
            if previous is None:
                if sample.interval_s is not None or any(d is not None for d in sample.deltas):
                    problems.append(f"{where}: the first stored sample has interval {sample.interval_s} and deltas "
                                    f"{sample.deltas}, as if it followed one that is not stored")  # fmt: skip
            else:
                span_s = (sample.ts - previous.ts).total_seconds()
                if not _same(sample.interval_s, span_s):
                    problems.append(f"{where}: interval {sample.interval_s} s, but the previous sample is {span_s} s "
                                    "earlier")  # fmt: skip
                for name, new, old, delta in zip(
                    ("periods", "throttled_periods", "throttled_seconds", "usage_seconds"),
                    sample.counters,
                    previous.counters,
                    sample.deltas,
                    strict=True,
                ):
                    expected = None if new is None or old is None else (new if new < old else new - old)
                    if not _same(delta, expected):
                        problems.append(f"{where}: {name} delta {delta}, expected {expected} ({old} → {new})")
                    if delta is not None and delta < 0:
                        problems.append(f"{where}: negative {name} delta {delta}")
            previous = sample
    return problems


def head_problems(dump: Dump) -> list[str]:
    """Series heads that are not their container's latest stored sample (a write half done), or missing ones."""
    problems = []
    for key, rows in _series(dump.samples).items():
        latest = rows[-1]
        head = dump.heads.get(key)
        if head is None:
            problems.append(f"{'/'.join(key)}: samples up to {latest.ts.isoformat()} but no series head")
        elif head != (latest.ts, latest.counters):
            problems.append(f"{'/'.join(key)}: head at {head[0].isoformat()} {head[1]}, latest sample at "
                            f"{latest.ts.isoformat()} {latest.counters}")  # fmt: skip
    return problems


def observations_without(
    dump: Dump, lost: Iterable[tuple[str | None, float]]
) -> set[tuple[Key, str, datetime, tuple[Any, ...], int | None]]:
    """The dump's observations minus those of (node, simulated cycle instant) pairs a fault lost (node None: all).

    A stats instant belongs to the cycle whose clock it precedes by less than a step (cAdvisor's instants trail the
    scrape's "now" by under its housekeeping interval)."""
    drop = list(lost)

    def dropped(node: str, ts: datetime) -> bool:
        at = ts.timestamp()
        return any((n is None or n == node) and instant - CYCLE_STEP_S < at <= instant for n, instant in drop)

    return {o for o in dump.observations() if not dropped(o[1], o[2])}


def nodes_at(dump: Dump, instant_s: float) -> set[str]:
    """The nodes with at least one sample from the cycle at `instant_s`."""
    return {s.node for s in dump.samples if instant_s - CYCLE_STEP_S < s.ts.timestamp() <= instant_s}


# ------------------------------------------------------------------------------------------------ an install


@dataclass
class Services:
    """The session's private PostgreSQL and Redis, with a migrated template database holding the drill cluster."""

    workdir: Path
    postgres: PrivatePostgres
    redis: PrivateRedis
    template: str
    kubeconfig: Path  # the path the drill cluster is registered with; each install points it at its own proxy


def start_services() -> Services:
    """initdb, start, migrate a template database and register the drill cluster in it (about 6 s)."""
    workdir = Path(tempfile.mkdtemp(prefix="cputune-drill-"))
    postgres = PrivatePostgres()
    redis = PrivateRedis(workdir)
    try:
        postgres.init()
        redis.start()
        template = "drill_template"
        url = postgres.create_database(template)
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text("apiVersion: v1\nkind: Config\n")  # replaced by each install before its worker starts
        env = drill_env(url, redis.url)
        manage(env, "migrate", "-v", "0")
        manage(env, "add_cluster", CLUSTER_NAME, "--kubeconfig", str(kubeconfig))
    except BaseException:
        stop_services(Services(workdir, postgres, redis, "", workdir / "kubeconfig"))
        raise
    return Services(workdir, postgres, redis, template, kubeconfig)


def stop_services(services: Services) -> None:
    services.redis.stop()
    services.postgres.destroy()
    shutil.rmtree(services.workdir, ignore_errors=True)


class Install:
    """One drill's install: its own database (from the template), the private Redis emptied, the simulated cluster
    behind a fault proxy, one prefork worker. Use as a context manager; everything it started stops on exit."""

    def __init__(
        self, services: Services, base_s: float, name: str, *, supervised: bool = False, **env_overrides: str
    ) -> None:
        self.services = services
        self.supervised = supervised  # the install's worker under cputune.supervise
        self.base_s = base_s
        self.name = name
        self.env_overrides = env_overrides
        self.workdir = services.workdir / name
        self.workdir.mkdir(exist_ok=True)
        self.database_name = f"drill_{name}"
        self._stack = contextlib.ExitStack()
        self.workers: list[CeleryProcess] = []
        self.beats: list[CeleryProcess] = []

    def __enter__(self) -> Install:
        try:
            services = self.services
            services.postgres.execute(f'DROP DATABASE IF EXISTS "{self.database_name}"')
            url = services.postgres.create_database(self.database_name, template=services.template)
            self.db = DrillDatabase(url)
            self.cluster_id = self.db.cluster_id()
            services.redis.command("FLUSHALL")  # nothing an earlier drill left queued
            self.env = drill_env(url, services.redis.url, **self.env_overrides)
            self.clock, self.simulator, self.proxy = self._stack.enter_context(simulated_cluster(self.base_s))
            self.nodes = sorted(self.simulator.cluster.node_names)
            from standins.http import write_kubeconfig

            write_kubeconfig(services.kubeconfig, self.proxy.url, self.simulator.token, name="drill")
            self.broker = Broker(services.redis.url)
            self._stack.callback(self.broker.close)
            self.worker = self.start_worker(supervised=self.supervised)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in [*self.beats, *self.workers]:
            process.stop()
        self._stack.close()

    def start_worker(self, name: str = "worker", *, supervised: bool = False) -> CeleryProcess:
        worker = CeleryProcess("worker", self.env, self.workdir, name=name, supervised=supervised)
        self.workers.append(worker)
        return worker.start()

    def start_beats(self, *names: str) -> list[CeleryProcess]:
        """Start beat schedulers (each with its own schedule file) at the same moment; returns them once ready."""
        beats = [CeleryProcess("beat", self.env, self.workdir, name=name) for name in names]
        self.beats.extend(beats)
        return [beat.wait_ready() for beat in [beat.launch() for beat in beats]]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail()}" for p in [*self.workers, *self.beats])

    # -- cycles

    def instant(self, cycle: int) -> float:
        return cycle_instant(self.base_s, cycle)

    def start_cycle(self, cycle: int, *, at_s: float | None = None) -> Run:
        """Set the simulated clock to the cycle's instant (or `at_s`), enqueue `collector.collect_cluster` as beat
        would, and return the new run once its inventory is stored (nodes_total known)."""
        self.clock.now_s = self.instant(cycle) if at_s is None else at_s
        known = {run.id for run in self.db.runs()}
        self.broker.send("collector.collect_cluster", self.cluster_id)

        def started() -> Run | None:
            fresh = [run for run in self.db.runs() if run.id not in known]
            return fresh[0] if fresh and (fresh[0].nodes_total or fresh[0].finished_at) else None

        return wait_until(started, 60, f"cycle {cycle}'s run starting\n{self.logs()}")

    def wait_closed(self, run_id: int, timeout_s: float = 60) -> Run:
        def closed() -> Run | None:
            run = next(r for r in self.db.runs() if r.id == run_id)
            return run if run.finished_at is not None else None

        return wait_until(closed, timeout_s, f"run {run_id} closing\n{self.logs()}", every_s=0.2)

    def run_cycle(self, cycle: int, *, at_s: float | None = None, timeout_s: float = 60) -> Run:
        """A whole cycle: start it and wait for its run to close."""
        return self.wait_closed(self.start_cycle(cycle, at_s=at_s).id, timeout_s)

    def wait_outcomes(self, run_id: int, count: int, timeout_s: float = 60) -> dict[str, NodeOutcome]:
        """Wait until `count` nodes of the run have an outcome; returns them."""

        def enough() -> dict[str, NodeOutcome] | None:
            outcomes = self.db.node_outcomes(run_id)
            return outcomes if len(outcomes) >= count else None

        return wait_until(enough, timeout_s, f"{count} node outcomes in run {run_id}\n{self.logs()}")
