"""`manage.py import_dump` on the real minikube dumps: what is stored is what the files say, read independently here
(plain string splits of the scrape lines, `yaml.safe_load` of the objects), and bad inputs fail clearly."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.advisor.models import Finding
from apps.clusters.models import POD_CGROUP, Cluster, Container, Node, Pod
from apps.collector.dump import DumpError, import_dump
from apps.collector.models import CollectionRun
from apps.telemetry.models import Sample

pytestmark = pytest.mark.django_db
CLUSTERS = Path(__file__).parent.parent / "fixtures" / "clusters"
COUNTER_FAMILIES = {
    "container_cpu_cfs_periods_total": "periods_total",
    "container_cpu_cfs_throttled_periods_total": "throttled_periods_total",
    "container_cpu_cfs_throttled_seconds_total": "throttled_seconds_total",
    "container_cpu_usage_seconds_total": "usage_seconds_total",
}
_LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


def folder(version: str) -> Path:
    return CLUSTERS / f"k8s-{version}-minikube"


def node_name(version: str) -> str:
    return yaml.safe_load((folder(version) / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]


def container_lines(text: str) -> dict[tuple[str, str, str], dict[str, tuple[float, int | None]]]:
    """(namespace, pod, container) → field → (value, timestamp ms), read with plain splits from the scrape lines of
    real containers (a pod, a named container, an image; usage only its cpu="total" series)."""
    out: dict[tuple[str, str, str], dict[str, tuple[float, int | None]]] = {}
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        if name not in COUNTER_FAMILIES:
            continue
        labels = dict(_LABEL.findall(line.rsplit("}", 1)[0]))
        if not labels.get("pod") or labels.get("container") in (None, "", "POD") or not labels.get("image"):
            continue
        if labels.get("cpu", "total") != "total":
            continue
        fields = line.rsplit("}", 1)[1].split()
        key = (labels["namespace"], labels["pod"], labels["container"])
        out.setdefault(key, {})[COUNTER_FAMILIES[name]] = (
            float(fields[0]),
            int(fields[1]) if len(fields) > 1 else None,
        )
    return out


def advanced(text: str, steps: dict[str, float]) -> str:
    """The scrape with every real container's counters raised by `steps` (field → increase)."""
    out = []
    for line in text.splitlines():
        name = line.split("{", 1)[0]
        labels = dict(_LABEL.findall(line.rsplit("}", 1)[0])) if name in COUNTER_FAMILIES else {}
        if (
            labels.get("pod")
            and labels.get("container") not in (None, "", "POD")
            and labels.get("cpu", "total") == "total"
        ):
            head, tail = line.rsplit("}", 1)
            fields = tail.split()
            step = steps[COUNTER_FAMILIES[name]]
            value = float(fields[0]) + step
            fields[0] = str(int(value)) if isinstance(step, int) else repr(value)
            line = f"{head}}} {' '.join(fields)}"
        out.append(line)
    return "\n".join(out) + "\n"


def run_command(*args: str) -> str:
    out = StringIO()
    call_command("import_dump", *args, stdout=out)
    return out.getvalue()


# ------------------------------------------------------------------------------------------------- real dumps


@pytest.mark.parametrize("version", ["1.31", "1.33"])
def test_importing_a_real_dump_stores_the_scrape_counters_and_the_objects(version):
    scrape = (folder(version) / "cadvisor.txt").read_text()
    node = node_name(version)

    output = run_command(
        "--cluster", "minikube",
        "--nodes", str(folder(version) / "nodes.yaml"),
        "--pods", str(folder(version) / "pods.yaml"),
        "--metrics", f"{node}={folder(version) / 'cadvisor.txt'}",
    )  # fmt: skip

    cluster = Cluster.objects.get(name="minikube")
    assert cluster.source == "dump"
    # Every real container's counters are stored as the scrape has them, at the scrape's own sample instant.
    expected = container_lines(scrape)
    assert len(expected) == Sample.objects.exclude(container__name=POD_CGROUP).count() > 10
    for (namespace, pod, container), fields in expected.items():
        sample = Sample.objects.get(
            container__pod__namespace=namespace, container__pod__name=pod, container__name=container
        )
        for field, (value, ts_ms) in fields.items():
            assert getattr(sample, field) == pytest.approx(value, rel=1e-12), (pod, container, field)
            assert ts_ms is not None  # this capture stamps its CPU series
            assert sample.ts == datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
        assert sample.interval_s is None and sample.periods_delta is None  # a single reading: lifetime counters only

    # The objects: the node's facts, and every pod that has not finished.
    node_object = yaml.safe_load((folder(version) / "nodes.yaml").read_text())["items"][0]
    stored_node = Node.objects.get(cluster=cluster)
    assert stored_node.kernel_version == node_object["status"]["nodeInfo"]["kernelVersion"]
    assert stored_node.capacity_mcpu == int(node_object["status"]["capacity"]["cpu"]) * 1000
    assert stored_node.has_cfs_counters is True
    pods = yaml.safe_load((folder(version) / "pods.yaml").read_text())["items"]
    live = [p for p in pods if p["status"]["phase"] not in ("Succeeded", "Failed")]
    assert Pod.objects.filter(cluster=cluster).count() == len(live) < len(pods)

    run = CollectionRun.objects.get(cluster=cluster)
    assert (run.source, run.status, run.nodes_ok, run.samples_written) == ("dump", "ok", 1, len(expected))
    assert f"{len(expected)} container(s) from 1 scrape(s)" in output
    assert "lifetime counters" in output
    # The advisor answered the import's announcement: findings refreshed now, summed up for the command to print.
    findings = Finding.objects.filter(cluster=cluster, window="1h")
    assert findings.count() == Container.objects.filter(pod__cluster=cluster).count()
    assert "Findings (last hour to " in output and f": {findings.count()} container(s), " in output


def test_one_container_checked_by_hand_in_the_133_dump():
    # Read off the fixture with `grep 'container="php-apache"' cadvisor.txt`: periods 9, throttled 3,
    # throttled 0.111226 s, usage 0.171685 s (cpu="total"), 6 threads, all stamped 1762283371530 ms; limit 500m.
    node = node_name("1.33")
    import_dump(
        "mk", folder("1.33") / "nodes.yaml", folder("1.33") / "pods.yaml", {node: folder("1.33") / "cadvisor.txt"}
    )

    php = Container.objects.get(pod__cluster__name="mk", name="php-apache")
    sample = Sample.objects.get(container=php)
    assert (sample.periods_total, sample.throttled_periods_total, sample.threads) == (9, 3, 6)
    assert sample.throttled_seconds_total == pytest.approx(0.111226)
    assert sample.usage_seconds_total == pytest.approx(0.171685)
    assert sample.ts == datetime(2025, 11, 4, 19, 9, 31, 530000, tzinfo=UTC)
    assert (php.limit_mcpu, php.request_mcpu, php.pod.workload_kind, php.pod.workload_name) == (
        500,
        200,
        "Deployment",
        "e2e-hpa",
    )
    # The finding shows the lifetime ratio 3/9, as of the dump's own instant (it is a year old).
    finding = Finding.objects.get(container=php, window="1h")
    assert finding.lifetime is True
    assert finding.throttle_ratio == pytest.approx(3 / 9)
    assert (finding.periods, finding.throttled_periods) == (9, 3)


def test_two_imports_at_given_instants_give_the_known_deltas(tmp_path):
    version = "1.33"
    node = node_name(version)
    original = (folder(version) / "cadvisor.txt").read_text()
    steps = {
        "periods_total": 100,
        "throttled_periods_total": 40,
        "throttled_seconds_total": 1.5,
        "usage_seconds_total": 2.25,
    }
    later = tmp_path / "cadvisor-later.txt"
    later.write_text(advanced(original, steps))
    first_at = (timezone.now() - timedelta(minutes=3)).replace(microsecond=0)
    second_at = first_at + timedelta(seconds=90)
    common = [
        "--cluster",
        "mk",
        "--nodes",
        str(folder(version) / "nodes.yaml"),
        "--pods",
        str(folder(version) / "pods.yaml"),
    ]

    run_command(*common, "--metrics", f"{node}={folder(version) / 'cadvisor.txt'}", "--at", first_at.isoformat())
    output = run_command(*common, "--metrics", f"{node}={later}", "--at", second_at.isoformat())

    expected = container_lines(original)
    cfs = [key for key, fields in expected.items() if "periods_total" in fields]
    assert len(cfs) >= 5
    for namespace, pod, container in expected:
        second = Sample.objects.get(container__pod__name=pod, container__name=container, ts=second_at)
        assert second.interval_s == 90
        assert second.usage_seconds_delta == pytest.approx(2.25)
        if (namespace, pod, container) in cfs:
            assert (second.periods_delta, second.throttled_periods_delta) == (100, 40)
            assert second.throttled_seconds_delta == pytest.approx(1.5)
            assert second.periods_total == expected[(namespace, pod, container)]["periods_total"][0] + 100
    assert f"{len(expected)} reading(s) follow an earlier one: window deltas stored" in output
    # What a user sees: the hour's findings are window ratios now, 40 of 100 periods, not the lifetime figures.
    for finding in Finding.objects.filter(window="1h", throttle_ratio__isnull=False):
        assert finding.lifetime is False
        assert finding.throttle_ratio == pytest.approx(0.4)
        assert finding.periods == 100


def test_importing_the_same_scrapes_again_stores_nothing_new():
    node = node_name("1.31")
    args = (folder("1.31") / "nodes.yaml", folder("1.31") / "pods.yaml", {node: folder("1.31") / "cadvisor.txt"})
    first = import_dump("mk", *args)
    again = import_dump("mk", *args)

    assert first.samples_written == first.readings > 0
    assert (again.samples_written, again.duplicates) == (0, first.readings)
    assert Sample.objects.exclude(container__name=POD_CGROUP).count() == first.readings
    assert CollectionRun.objects.filter(cluster__name="mk").count() == 2


def test_json_dumps_import_like_yaml_ones(tmp_path):
    nodes_json = tmp_path / "nodes.json"
    pods_json = tmp_path / "pods.json"
    nodes_json.write_text(json.dumps(yaml.safe_load((folder("1.33") / "nodes.yaml").read_text())))
    pods_json.write_text(json.dumps(yaml.safe_load((folder("1.33") / "pods.yaml").read_text())))
    node = node_name("1.33")
    from_yaml = import_dump(
        "a", folder("1.33") / "nodes.yaml", folder("1.33") / "pods.yaml", {node: folder("1.33") / "cadvisor.txt"}
    )
    from_json = import_dump("b", nodes_json, pods_json, {node: folder("1.33") / "cadvisor.txt"})

    def stored(cluster: str) -> set[tuple]:
        return set(
            Container.objects.filter(pod__cluster__name=cluster).values_list(
                "pod__namespace", "pod__name", "pod__qos_class", "name", "request_mcpu", "limit_mcpu", "container_id"
            )
        )

    assert stored("a") == stored("b")
    assert (from_json.pods, from_json.readings) == (from_yaml.pods, from_yaml.readings)


# ------------------------------------------------------------------------------------------------- bad input


def test_a_missing_file_is_named_and_nothing_is_written(tmp_path):
    with pytest.raises(DumpError, match=r"--pods file .*no-such-pods\.json does not exist"):
        import_dump("mk", folder("1.33") / "nodes.yaml", tmp_path / "no-such-pods.json", {})
    with pytest.raises(DumpError, match=r"--metrics n1=.*gone\.txt: the file does not exist"):
        import_dump("mk", folder("1.33") / "nodes.yaml", folder("1.33") / "pods.yaml", {"n1": tmp_path / "gone.txt"})
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"apiVersion": "v1", "items": [', r"neither JSON nor YAML \(JSON: "),
        ("items: [\n  - {kind: Node\n", r"neither JSON nor YAML \(YAML: .* line \d+"),
        ("just some words\n", r"not a Kubernetes list: expected a Kubernetes list or object, got a str"),
        ('{"nodes": []}', r"not a Kubernetes list: a mapping with keys \['nodes'\]"),
        ("", r"is empty"),
    ],
    ids=["broken-json", "broken-yaml", "scalar", "mapping-without-items", "empty"],
)
def test_a_file_that_is_not_a_kubernetes_list_is_refused(tmp_path, content, message):
    bad = tmp_path / "nodes.json"
    bad.write_text(content)
    with pytest.raises(DumpError, match=message):
        import_dump("mk", bad, folder("1.33") / "pods.yaml", {})
    assert not Cluster.objects.exists()


def test_swapped_nodes_and_pods_are_recognised():
    with pytest.raises(DumpError, match=r"--nodes file .*pods\.yaml holds 24 Pod object\(s\).*swapped"):
        import_dump("mk", folder("1.33") / "pods.yaml", folder("1.33") / "nodes.yaml", {})


def test_a_scrape_that_is_not_exposition_text_is_refused(tmp_path):
    html = tmp_path / "cadvisor.txt"
    html.write_text("<html><body>502 Bad Gateway</body></html>\n")
    with pytest.raises(DumpError, match=r"--metrics datagen-1-33=.*cadvisor\.txt: not Prometheus exposition text"):
        import_dump("mk", folder("1.33") / "nodes.yaml", folder("1.33") / "pods.yaml", {"datagen-1-33": html})
    assert not Sample.objects.exists()


def test_malformed_scrape_lines_are_counted_and_the_rest_imported(tmp_path):
    text = (folder("1.33") / "cadvisor.txt").read_text().splitlines()
    php = [
        i
        for i, line in enumerate(text)
        if 'container="php-apache"' in line and line.startswith("container_cpu_cfs_periods_total{")
    ]
    kindnet = [
        i for i, line in enumerate(text) if 'container="kindnet-cni"' in line and line.startswith("container_threads{")
    ]
    text[php[0]] = text[php[0]].rsplit("}", 1)[0] + "} twelve 1762283371530"  # unreadable value
    text[kindnet[0]] = text[kindnet[0]][:60]  # cut off mid-labels
    broken = tmp_path / "cadvisor.txt"
    broken.write_text("\n".join(text) + "\n")

    result = import_dump("mk", folder("1.33") / "nodes.yaml", folder("1.33") / "pods.yaml", {"datagen-1-33": broken})

    assert len(result.problems) == 2
    assert all(p.startswith("cadvisor.txt: line ") for p in result.problems)
    php_sample = Sample.objects.get(container__name="php-apache")
    assert php_sample.periods_total is None  # the bad value only
    assert php_sample.throttled_periods_total == 3
    assert Sample.objects.exclude(container__name=POD_CGROUP).count() == len(
        container_lines((folder("1.33") / "cadvisor.txt").read_text())
    )
    assert CollectionRun.objects.get().problems.count() == 2


def test_a_scrape_for_a_node_the_dump_does_not_know_is_imported_with_a_warning():
    result = import_dump(
        "mk", folder("1.33") / "nodes.yaml", folder("1.33") / "pods.yaml", {"worker-7": folder("1.33") / "cadvisor.txt"}
    )

    assert any("node 'worker-7'" in w and "not in the nodes file" in w for w in result.warnings)
    assert any("other nodes: datagen-1-33" in w for w in result.warnings)
    assert Sample.objects.exclude(container__name=POD_CGROUP).count() == result.readings > 0
    # The pods stay on the node the pods file names; no node is made up.
    assert set(Pod.objects.exclude(node=None).values_list("node__name", flat=True)) == {"datagen-1-33"}
    assert set(Node.objects.values_list("name", flat=True)) == {"datagen-1-33"}


def test_command_line_mistakes_are_clear_errors(tmp_path):
    common = [
        "--cluster",
        "mk",
        "--nodes",
        str(folder("1.33") / "nodes.yaml"),
        "--pods",
        str(folder("1.33") / "pods.yaml"),
    ]
    with pytest.raises(CommandError, match=r"expected NODE=PATH"):
        run_command(*common, "--metrics", str(folder("1.33") / "cadvisor.txt"))
    with pytest.raises(CommandError, match=r"node 'n1' is given twice"):
        run_command(*common, "--metrics", "n1=a.txt", "--metrics", "n1=b.txt")
    with pytest.raises(CommandError, match=r"--at 'yesterday' is not an ISO 8601 instant"):
        run_command(*common, "--metrics", f"n1={folder('1.33') / 'cadvisor.txt'}", "--at", "yesterday")
    with pytest.raises(CommandError, match=r"cluster name 'Not a slug!' cannot be used"):
        run_command(*common[2:], "--cluster", "Not a slug!", "--metrics", f"n1={folder('1.33') / 'cadvisor.txt'}")
    assert not Cluster.objects.exists()


def test_at_without_a_zone_is_utc():
    node = node_name("1.33")
    run_command(
        "--cluster", "mk", "--nodes", str(folder("1.33") / "nodes.yaml"), "--pods", str(folder("1.33") / "pods.yaml"),
        "--metrics", f"{node}={folder('1.33') / 'cadvisor.txt'}", "--at", "2026-11-30T08:15:00",
    )  # fmt: skip
    assert set(Sample.objects.values_list("ts", flat=True)) == {datetime(2026, 11, 30, 8, 15, tzinfo=UTC)}
