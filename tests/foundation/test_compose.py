"""docker-compose.yml is valid, and every service of ours runs a command that also runs here.

No Docker engine runs on CI machines, so the file is validated with Debian's docker-compose (`config -q`) and each
app service's command is started locally against a throwaway SQLite database and the embedded broker.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def compose_config() -> dict:
    if not shutil.which("docker-compose"):
        pytest.skip("needs Debian's docker-compose package to validate the file")
    env = {**os.environ, "SECRET_KEY": "compose-test"}
    check = subprocess.run(["docker-compose", "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    out = subprocess.run(["docker-compose", "config"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return yaml.safe_load(out.stdout)


def local_argv(command: list[str]) -> list[str]:
    """The service's command with its programs taken from this virtualenv."""
    program = {"python": sys.executable, "gunicorn": str(BIN / "gunicorn"), "celery": str(BIN / "celery")}
    return [program.get(command[0], command[0]), *command[1:]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def local_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "CPUTUNE_BROKER_URL"}}
    env.update(
        SECRET_KEY="compose-test-" + "k" * 50,  # long enough for the DEBUG=0 key rule
        DEBUG="0",
        CPUTUNE_DATA_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CPUTUNE_ADMIN_PASSWORD="compose-test-password",
        PATH=f"{BIN}:{env.get('PATH', '')}",
    )
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    return env


def test_compose_file_is_valid_and_uses_one_image_for_the_app():
    services = compose_config()["services"]
    assert {"db", "redis", "migrate", "web", "worker", "beat"} <= services.keys()
    app = ["migrate", "web", "worker", "beat"]
    assert {services[s]["image"] for s in app} == {"cputune:latest"}
    for name in ("db", "redis", "web"):
        assert "healthcheck" in services[name], f"{name} has no healthcheck"
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_redis_keeps_its_queue_across_a_restart():
    """Queued tasks live in Redis: without the append-only file on a volume a restart drops every queued cycle."""
    config = compose_config()
    redis = config["services"]["redis"]
    command = redis["command"]
    command = command.split() if isinstance(command, str) else command
    options = dict(zip(command[1::2], command[2::2], strict=False))
    assert (options.get("--appendonly"), options.get("--appendfsync")) == ("yes", "everysec"), command
    data_dir = options.get("--dir", "/data")
    mounts = [
        v for v in redis.get("volumes", []) if (v["target"] if isinstance(v, dict) else v.split(":")[1]) == data_dir
    ]
    assert mounts, f"no volume at {data_dir}: the append-only file would go with the container"
    (mount,) = mounts
    source = mount["source"] if isinstance(mount, dict) else mount.split(":")[0]
    assert source in config.get("volumes", {}), f"{source} is not a named volume"
    assert redis["restart"] == "unless-stopped"


@pytest.mark.slow
def test_every_app_service_command_runs_here(local_env):
    services = compose_config()["services"]

    migrate = services["migrate"]["command"]
    assert migrate[:2] == ["sh", "-c"]
    done = subprocess.run(
        ["sh", "-c", migrate[2]], cwd=ROOT, env=local_env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr

    port = free_port()
    web = local_argv([a.replace("0.0.0.0:8000", f"127.0.0.1:{port}") for a in services["web"]["command"]])
    worker = [*local_argv(services["worker"]["command"]), "--without-gossip", "--without-mingle"]
    beat = local_argv(services["beat"]["command"])
    beat[beat.index("-s") + 1] = str(Path(local_env["CPUTUNE_DATA_DIR"]) / "beat-schedule")

    procs = {
        name: subprocess.Popen(argv, cwd=ROOT, env=local_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
        for name, argv in (("web", web), ("worker", worker), ("beat", beat))
    }  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        healthy = False
        while time.monotonic() < deadline and not healthy:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    healthy = response.status == 200
            except OSError:
                time.sleep(0.5)
        assert healthy, "web did not answer /healthz within 60 s"
        time.sleep(3)
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited early: {proc.stdout.read() if proc.stdout else ''}"
    finally:
        outputs = {}
        for name, proc in procs.items():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                outputs[name] = proc.communicate(timeout=15)[0]
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                outputs[name] = proc.communicate()[0]
    assert "ready." in outputs["worker"], outputs["worker"][-2000:]
    assert "beat: Starting" in outputs["beat"], outputs["beat"][-2000:]
