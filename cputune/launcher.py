"""`make run`: everything on one machine with no system service — web, worker, beat, and the lab when it can run.

Prepares the environment (data folder, a generated SECRET_KEY kept in it), migrates, creates the first login, brings
the lab up when this machine allows it, then supervises the processes until Ctrl-C or SIGTERM, and stops them all
(and the lab) on the way out. Django is never imported here: each step is its own process.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HOST = os.environ.get("CPUTUNE_HOST", "127.0.0.1")
PORT = os.environ.get("CPUTUNE_PORT", "8000")


def say(message: str) -> None:
    print(f"[cputune] {message}", flush=True)


def prepare_env() -> dict[str, str]:
    env = dict(os.environ)
    data_dir = Path(env.get("CPUTUNE_DATA_DIR", ROOT / "var"))
    data_dir.mkdir(parents=True, exist_ok=True)
    env["CPUTUNE_DATA_DIR"] = str(data_dir)
    if not env.get("SECRET_KEY"):
        key_file = data_dir / "secret_key"
        if not key_file.exists():
            key_file.write_text(secrets.token_urlsafe(50))
            key_file.chmod(0o600)
        env["SECRET_KEY"] = key_file.read_text().strip()
    # Served over plain http on localhost: cookies marked Secure would never come back.
    env.setdefault("CPUTUNE_SECURE_COOKIES", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def manage(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=check)


def wait_for_web(url: str, timeout_s: float = 60) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own local URL
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False


def main() -> int:
    env = prepare_env()
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "collectstatic", "--noinput", "-v0")
    manage(env, "ensure_admin")
    lab = manage(env, "lab", "up", "--if-possible", check=False)
    lab_started = lab.returncode == 0
    if lab_started:
        # A first reading now, so the pages have the lab's lifetime counters before beat's first cycle.
        manage(env, "collect", "--cluster", "lab", check=False)
    else:
        say("starting without the lab (see above); register a cluster with manage.py add_cluster to collect from it.")

    bind = f"{HOST}:{PORT}"
    commands = {
        # The control socket in this install's data folder: gunicorn's default (~/.gunicorn/gunicorn.ctl) is one per
        # user, so two installs on one host took each other's.
        "web": [PY, "-m", "gunicorn", "cputune.wsgi", "-b", bind, "-w", "2", "--timeout", "60", "--access-logfile", "-",
                "--control-socket", str(Path(env["CPUTUNE_DATA_DIR"]) / "gunicorn.ctl")],
        # Under cputune.supervise: a worker that exits (a broker restart can stop it) is started again.
        "worker": [PY, "-m", "cputune.supervise", PY, "-m", "celery", "-A", "cputune", "worker", "-l", "info", "-c", "2", "--without-gossip",
                   "--without-mingle", "--without-heartbeat"],
        "beat": [PY, "-m", "celery", "-A", "cputune", "beat", "-l", "info",
                 "-s", str(Path(env["CPUTUNE_DATA_DIR"]) / "celerybeat-schedule")],
    }  # fmt: skip
    procs: dict[str, subprocess.Popen] = {}
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for name, cmd in commands.items():
            # Own process groups: Ctrl-C reaches only this supervisor, which then stops each child in order.
            procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
        if wait_for_web(f"http://{bind}/healthz"):
            say(
                f"cputune is up at http://{bind}/ — log in as {env.get('CPUTUNE_ADMIN_USER', 'admin')}. Ctrl-C stops it all."
            )
        probe = None
        if lab_started:
            # The kernel probe (~25 s) measures this kernel for the lab node's page; it runs once, beside the rest.
            say("measuring this kernel in the background (manage.py kernel_probe, ~25 s)…")
            probe = subprocess.Popen(
                [PY, "manage.py", "kernel_probe", "--cluster", "lab"], cwd=ROOT, env=env, start_new_session=True
            )
        while not stopping:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    say(f"{name} exited with status {proc.returncode}; stopping everything.")
                    stopping = True
            time.sleep(0.5)
        if probe is not None and probe.poll() is None:
            probe.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                probe.wait(timeout=10)
    finally:
        say("stopping web, worker and beat…")
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # each stops its own children (gunicorn and celery warm shutdown)
        deadline = time.monotonic() + 15
        for proc in procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of its process group
        if lab_started:
            manage(env, "lab", "down", check=False)
        say("stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
