"""manage.py kernel_probe measures this kernel and stores the figures on the node."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from apps.clusters.models import Node

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.django_db]


def test_kernel_probe_prints_a_verdict_and_stores_it_on_the_node(settings, lab_root, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.CPUTUNE_LAB_ROOT = lab_root
    out = StringIO()

    call_command("kernel_probe", "--node", "probe-node", "--iterations", "30", stdout=out)

    text = out.getvalue()
    assert "Verdict:" in text and "fibtest" in text and "Work loop" in text
    node = Node.objects.get(name="probe-node")
    assert node.probe is not None and node.probe_at is not None
    assert node.probe["workloop_iterations"] == 30
    # On this (fixed) kernel a 50 ms / 100 ms quota hands out close to 50 ms per period, as quota x periods says.
    assert 0.85 <= node.probe["fibtest_cpu_ratio"] <= 1.15
    assert node.probe["verdict"] in text
