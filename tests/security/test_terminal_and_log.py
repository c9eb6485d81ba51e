"""Strings from outside reach logs and terminals escaped (issue 14, item 9): an agent's error lines in the server log,
names and problems from dump files in import_dump's output. A raw newline forges a log line; ESC ] 0 ; … BEL retitles
the terminal, ESC [ 2 J clears it."""

from __future__ import annotations

import logging
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.words import printable

DUMP = Path(__file__).resolve().parents[1] / "fixtures" / "clusters" / "k8s-1.33-minikube"
FORGED = "2026-12-02 06:00:00,000 ERROR django.request: forged"
TITLE = "\x1b]0;pwned\x07"


def test_printable_escapes_what_a_terminal_or_log_would_act_on():
    assert printable("web-0") == "web-0"
    assert printable(f"a\r\n{FORGED}") == f"a\\r\\n{FORGED}"
    assert printable(f"{TITLE}\x1b[2J\u2028\u202e\x00é") == "\\x1b]0;pwned\\x07\\x1b[2J\\u2028\\u202e\\x00é"


def test_an_agents_error_lines_reach_the_log_escaped(client_for, ingest_key, demo, caplog):
    payload = {
        "agent_version": "1.0",
        "node": {"name": "demo-node-0", "kernel_version": "", "capacity_mcpu": None, "cfs_slice_us": None,
                 "cpufreq_governor": ""},
        "cgroup_version": 2,
        "collected_at": timezone.now().isoformat(),
        "containers": [],
        "errors": [f"cannot read /sys/fs/cgroup/x\n{FORGED}{TITLE}"],
    }  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="apps.collector.push"):
        response = client_for(ingest_key).post("/api/v1/ingest/", payload, format="json")
    assert response.status_code == 200, response.content
    [message] = [r.getMessage() for r in caplog.records if r.name == "apps.collector.push"]
    assert "\n" not in message and "\x1b" not in message
    assert message.endswith(f"first: cannot read /sys/fs/cgroup/x\\n{FORGED}\\x1b]0;pwned\\x07")


def test_inventory_problems_logged_without_a_list_are_escaped(caplog):
    from apps.clusters.columns import note, said

    with caplog.at_level(logging.WARNING, logger="apps.clusters.columns"):
        note(None, said("pod {}/{} is listed twice; the last one kept", "shop", f"web\nERROR forged{TITLE}"))
    [message] = [r.getMessage() for r in caplog.records if r.name == "apps.clusters.columns"]
    assert message == "pod shop/web\\nERROR forged\\x1b]0;pwned\\x07 is listed twice; the last one kept"


@pytest.mark.django_db
def test_import_dump_prints_names_from_its_input_escaped():
    node = f"minikube{TITLE}\n{FORGED}"
    out = StringIO()
    call_command(
        "import_dump", "--cluster", "mk", "--nodes", str(DUMP / "nodes.yaml"), "--pods", str(DUMP / "pods.yaml"),
        "--metrics", f"{node}={DUMP / 'cadvisor.txt'}", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert not any(line.startswith(FORGED) for line in text.splitlines())
    assert f"  minikube\\x1b]0;pwned\\x07\\n{FORGED}: {DUMP / 'cadvisor.txt'} — " in text


@pytest.mark.django_db
def test_import_dump_refusals_quote_the_file_escaped(tmp_path):
    pods = tmp_path / "pods.json"
    pods.write_text('{"kind": "List", "items": [{"kind": "Pod\\u001b[2J\\nForged", "metadata": {"name": "p"}}]}')
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_dump", "--cluster", "mk", "--nodes", str(pods), "--pods", str(pods),
            "--metrics", f"n={DUMP / 'cadvisor.txt'}", stdout=StringIO(),
        )  # fmt: skip
    message = str(refused.value)
    assert "\x1b" not in message and "\n" not in message
    assert "Pod\\x1b[2J\\nForged" in message
