"""`make run`, then every command the README shows, typed as shown in another terminal — no SECRET_KEY, no DEBUG —
as a newcomer does in their first hour. The cluster the README registers (`add_cluster prod --kubeconfig
~/.kube/config --context prod-admin`) is the local API-server stand-in playing a recorded minikube cluster, so
`collect --cluster prod --once` really collects."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from standins.apiserver import ApiServerStandin
from standins.http import write_kubeconfig

pytestmark = [pytest.mark.slow, pytest.mark.root]  # the lab the README walks through needs root

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "clusters" / "k8s-1.33-minikube"
PASSWORD = "first-hour-password-1"
# What the test's own environment sets that a newcomer's shell does not have.
NOT_IN_A_NEWCOMERS_SHELL = (
    "DATABASE_URL",
    "REDIS_URL",
    "CPUTUNE_BROKER_URL",
    "SECRET_KEY",
    "DEBUG",
    "CPUTUNE_NO_SKIPS",
)


def readme_commands() -> list[str]:
    """The manage.py and curl lines of the README's shell blocks, in reading order."""
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip()
            if re.match(r"(sudo )?\.venv/bin/python manage\.py |curl ", line):
                lines.append(line)
    return lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Output:
    """A process's merged output, read in a thread so it never blocks on a full pipe."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, needle: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if needle in self.text():
                return True
            time.sleep(0.2)
        return False


def test_make_run_then_every_readme_command_works_as_shown_in_another_terminal(tmp_path: Path) -> None:
    commands = readme_commands()
    assert any("create_token" in c for c in commands) and any(c.startswith("curl") for c in commands)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in NOT_IN_A_NEWCOMERS_SHELL}
    env.update(
        HOME=str(home),
        CPUTUNE_DATA_DIR=str(tmp_path / "var"),
        CPUTUNE_PORT=str(port),
        CPUTUNE_ADMIN_PASSWORD=PASSWORD,
        CPUTUNE_LAB_ROOT=f"cputune-readme-{os.getpid()}",
    )
    with ApiServerStandin(FIXTURE) as standin:
        write_kubeconfig(home / ".kube" / "config", standin.url, standin.token, name="prod-admin")
        run = subprocess.Popen(
            ["make", "run"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        out = Output(run)
        try:
            assert out.wait_for("cputune is up at", timeout_s=240), out.text()[-4000:]
            # gunicorn's control socket is this install's own, not the user-wide ~/.gunicorn/gunicorn.ctl.
            assert (tmp_path / "var" / "gunicorn.ctl").is_socket() and not (home / ".gunicorn").exists()
            results = {}
            for line in commands:
                if line.startswith("sudo "):
                    if os.geteuid() != 0:
                        continue  # a newcomer without root skips these as well; the lab needs root
                    if shutil.which("sudo") is None:
                        line = line.removeprefix("sudo ")
                line = line.replace("127.0.0.1:8000", f"127.0.0.1:{port}")  # CPUTUNE_PORT: a free port here
                done = subprocess.run(
                    ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
                )
                assert done.returncode == 0 and "Traceback" not in done.stderr, (line, done.stdout, done.stderr)
                results[line] = done.stdout
                if "create_token" in line:
                    env["KEY"] = done.stdout.split()[-1]
            # `collect --cluster prod --once` read every node of the recorded cluster through the stand-in.
            nodes = subprocess.run(
                ["curl", "-s", "-H", f"Authorization: Token {env['KEY']}",
                 f"http://127.0.0.1:{port}/api/v1/clusters/prod/nodes/"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            assert sorted(n["name"] for n in json.loads(nodes.stdout)["results"]) == sorted(standin.node_names)
        finally:
            os.killpg(run.pid, signal.SIGINT)  # Ctrl-C in make run's terminal
            run.wait(timeout=60)
    assert "stopped." in out.text(), out.text()[-2000:]
    assert "Traceback" not in out.text(), out.text()[-4000:]

    by_start = {line.split("?")[0].split()[-1].rstrip('"'): stdout for line, stdout in results.items()}
    containers = json.loads(next(v for k, v in by_start.items() if k.endswith("/containers/")))
    assert containers["count"] > 0 and containers["results"][0]["cluster"] == "lab"
    recommendations = next(v for k, v in results.items() if "format=csv" in k)
    assert next(csv.reader(io.StringIO(recommendations)))[:3] == ["cluster", "namespace", "workload_kind"]
    slack = json.loads(next(v for k, v in results.items() if "format=slack" in k))
    assert slack["blocks"] and "lab/shop" in slack["blocks"][0]["text"]["text"]
    kernel = json.loads(next(v for k, v in results.items() if "kernel-check" in k))
    assert kernel["version"] == "4.14.133-113.105.amzn2.x86_64" and kernel["verdict"] in {"fixed", "affected"}
