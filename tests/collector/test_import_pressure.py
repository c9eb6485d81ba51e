"""CPU pressure (PSI) from the real Kubernetes 1.34 minikube dump: the stored totals are the scrape's own lines (read
here with plain splits), a zero beside throttling is shown as "not measured", not as a figure, and a second import a
minute and a half later gives pressure per second where the counters moved."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from apps.advisor.models import Finding
from apps.advisor.selectors import report_row
from apps.clusters.models import Node
from apps.telemetry.models import Sample

pytestmark = pytest.mark.django_db
CLUSTERS = Path(__file__).parent.parent / "fixtures" / "clusters"
PSI = CLUSTERS / "k8s-1.34-minikube-psi"
FAMILIES = {
    "container_cpu_cfs_periods_total": "periods_total",
    "container_cpu_cfs_throttled_periods_total": "throttled_periods_total",
    "container_cpu_cfs_throttled_seconds_total": "throttled_seconds_total",
    "container_cpu_usage_seconds_total": "usage_seconds_total",
    "container_pressure_cpu_waiting_seconds_total": "pressure_waiting_seconds_total",
    "container_pressure_cpu_stalled_seconds_total": "pressure_stalled_seconds_total",
}
_LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


def _container_labels(line: str) -> dict[str, str] | None:
    if line.split("{", 1)[0] not in FAMILIES:
        return None
    labels = dict(_LABEL.findall(line.rsplit("}", 1)[0]))
    if not labels.get("pod") or labels.get("container") in (None, "", "POD") or not labels.get("image"):
        return None
    return labels if labels.get("cpu", "total") == "total" else None


def scrape_values(text: str) -> dict[tuple[str, str], dict[str, float]]:
    """(pod, container) → field → value for the real containers' lines."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for line in text.splitlines():
        labels = _container_labels(line)
        if labels is not None:
            field = FAMILIES[line.split("{", 1)[0]]
            out.setdefault((labels["pod"], labels["container"]), {})[field] = float(line.rsplit("}", 1)[1].split()[0])
    return out


def advanced(text: str, steps: dict[str, float]) -> str:
    """The scrape with every real container's counters in `steps` raised by their step."""
    out = []
    for line in text.splitlines():
        labels = _container_labels(line)
        field = FAMILIES.get(line.split("{", 1)[0])
        if labels is not None and field in steps:
            head, tail = line.rsplit("}", 1)
            fields = tail.split()
            step = steps[field]
            value = float(fields[0]) + step
            fields[0] = str(int(value)) if isinstance(step, int) else repr(value)
            line = f"{head}}} {' '.join(fields)}"
        out.append(line)
    return "\n".join(out) + "\n"


def node_name(folder: Path) -> str:
    return yaml.safe_load((folder / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]


def import_at(folder: Path, scrape: Path, at=None, cluster: str = "mk") -> str:
    args = ["--cluster", cluster, "--nodes", str(folder / "nodes.yaml"), "--pods", str(folder / "pods.yaml")]
    args += ["--metrics", f"{node_name(folder)}={scrape}"]
    if at is not None:
        args += ["--at", at.isoformat()]
    out = StringIO()
    call_command("import_dump", *args, stdout=out)
    return out.getvalue()


def test_the_134_dump_stores_each_containers_pressure_totals_as_its_scrape_lines():
    import_at(PSI, PSI / "cadvisor.txt")

    expected = scrape_values((PSI / "cadvisor.txt").read_text())
    with_pressure = {key: v for key, v in expected.items() if "pressure_waiting_seconds_total" in v}
    assert len(with_pressure) >= 10
    for (pod, container), values in with_pressure.items():
        sample = Sample.objects.get(container__pod__name=pod, container__name=container)
        assert sample.pressure_waiting_seconds_total == pytest.approx(values["pressure_waiting_seconds_total"])
        assert sample.pressure_stalled_seconds_total == pytest.approx(values["pressure_stalled_seconds_total"])
    assert Node.objects.get(name=node_name(PSI)).has_pressure is True


def test_a_dump_without_pressure_series_stores_none_and_says_the_node_exports_none():
    folder = CLUSTERS / "k8s-1.33-minikube"
    import_at(folder, folder / "cadvisor.txt")

    assert Node.objects.get(name=node_name(folder)).has_pressure is False
    assert not Sample.objects.filter(pressure_waiting_seconds_total__isnull=False).exists()
    rows = [report_row(f) for f in Finding.objects.filter(window="1h")]
    assert rows and {row["pressure_status"] for row in rows} == {"not_exported"}


def test_zero_pressure_beside_throttling_in_the_real_dump_is_not_measured_not_a_figure():
    # Every PSI value in this scrape is 0, although the perl containers were throttled in nearly all their periods:
    # a throttled task waits, so these zeros say pressure was not measured on that node.
    import_at(PSI, PSI / "cadvisor.txt")

    expected = scrape_values((PSI / "cadvisor.txt").read_text())
    throttled = {k for k, v in expected.items() if v.get("throttled_seconds_total", 0) >= 0.1}
    assert len(throttled) >= 5
    assert all(v.get("pressure_waiting_seconds_total") == 0 for v in expected.values())
    # Containers with CFS counters get lifetime findings; the others have no figure of any kind until a second reading.
    lifetime = Finding.objects.filter(window="1h", lifetime=True).select_related("container__pod")
    assert lifetime.count() > len(throttled)
    for finding in lifetime:
        row = report_row(finding)
        key = (row["pod"], row["container"])
        assert row["pressure_waiting_per_second"] is None  # one reading gives no rate
        assert row["pressure_status"] == ("not_measured" if key in throttled else "measured"), key


def test_a_second_import_gives_pressure_per_second_where_it_moved_and_not_measured_where_it_did_not(tmp_path):
    original = (PSI / "cadvisor.txt").read_text()
    first_at = (timezone.now() - timedelta(minutes=3)).replace(microsecond=0)
    import_at(PSI, PSI / "cadvisor.txt", first_at)
    # Ninety seconds later: every container throttled 1.5 s more; pressure moved in one run, not in the other.
    throttling = {"periods_total": 100, "throttled_periods_total": 40, "throttled_seconds_total": 1.5}
    moved = tmp_path / "moved.txt"
    moved.write_text(
        advanced(original, throttling | {"pressure_waiting_seconds_total": 0.9, "pressure_stalled_seconds_total": 0.3})
    )
    still = tmp_path / "still.txt"
    still.write_text(advanced(original, throttling | {"usage_seconds_total": 2.0}))

    import_at(PSI, moved, first_at + timedelta(seconds=90))
    cfs = Finding.objects.filter(cluster__name="mk", window="1h", periods=100).select_related("container__pod")
    assert cfs.count() >= 5
    for finding in cfs:
        row = report_row(finding)
        assert row["pressure_status"] == "measured"
        assert row["pressure_waiting_per_second"] == pytest.approx(0.9 / 90, abs=1e-4)
        assert row["pressure_stalled_per_second"] == pytest.approx(0.3 / 90, abs=1e-4)

    import_at(PSI, PSI / "cadvisor.txt", first_at, cluster="mk2")
    import_at(PSI, still, first_at + timedelta(seconds=90), cluster="mk2")
    cfs = Finding.objects.filter(cluster__name="mk2", window="1h", periods=100).select_related("container__pod")
    assert cfs.count() >= 5
    for finding in cfs:
        row = report_row(finding)
        assert (row["pressure_status"], row["pressure_waiting_per_second"]) == ("not_measured", None)
