"""Pod-level throttling from the real Kubernetes 1.34 dump: each pod cgroup with a quota (`container=""` series) is
stored as its own series, equal to the scrape's lines (read here with plain splits), kept out of every container
list, and the pod page says when the pod's quota throttles beyond its containers'."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from apps.advisor.models import Finding
from apps.advisor.pod_quota import judge_pod_quota, pod_ceiling
from apps.advisor.selectors import pod_quota, recommendation_rows, report_row
from apps.clusters.models import POD_CGROUP, Container, Pod
from apps.collector.inventory import pods_from_objects
from apps.telemetry.models import Sample

pytestmark = pytest.mark.django_db
PSI = Path(__file__).parent.parent / "fixtures" / "clusters" / "k8s-1.34-minikube-psi"
FAMILIES = {
    "container_cpu_cfs_periods_total": "periods_total",
    "container_cpu_cfs_throttled_periods_total": "throttled_periods_total",
    "container_cpu_cfs_throttled_seconds_total": "throttled_seconds_total",
}
_LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


def pod_cgroup_lines() -> dict[str, dict[str, float]]:
    """pod → CFS field → value for the pod cgroups' own lines (container "", a pod label)."""
    out: dict[str, dict[str, float]] = {}
    for line in (PSI / "cadvisor.txt").read_text().splitlines():
        family = line.split("{", 1)[0]
        if family not in FAMILIES:
            continue
        labels = dict(_LABEL.findall(line.rsplit("}", 1)[0]))
        if labels.get("container") == "" and labels.get("pod"):
            out.setdefault(labels["pod"], {})[FAMILIES[family]] = float(line.rsplit("}", 1)[1].split()[0])
    return out


def import_psi() -> str:
    node = yaml.safe_load((PSI / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]
    out = StringIO()
    call_command(
        "import_dump", "--cluster", "mk", "--nodes", str(PSI / "nodes.yaml"), "--pods", str(PSI / "pods.yaml"),
        "--metrics", f"{node}={PSI / 'cadvisor.txt'}", stdout=out,
    )  # fmt: skip
    return out.getvalue()


def test_each_pod_cgroup_with_a_quota_is_stored_as_its_scrape_lines_and_listed_nowhere_as_a_container():
    output = import_psi()

    expected = pod_cgroup_lines()
    assert len(expected) == 8 and expected["e2e-deployment-667b4749d4-4tjwb"]["throttled_periods_total"] == 461
    for pod, values in expected.items():
        sample = Sample.objects.get(container__pod__name=pod, container__name=POD_CGROUP)
        assert sample.periods_total == values["periods_total"]
        assert sample.throttled_periods_total == values["throttled_periods_total"]
        assert sample.throttled_seconds_total == pytest.approx(values["throttled_seconds_total"])
    assert "8 pod cgroup(s) with a pod-level quota" in output
    # Not a container anywhere: not in a pod's containers, not in the findings the report and API read.
    assert not Container.objects.filter(name=POD_CGROUP).exists()
    assert Container.with_pod_cgroups.filter(name=POD_CGROUP).count() == 8
    assert not Finding.objects.filter(container__name=POD_CGROUP).exists()
    deployment = Pod.objects.get(name="e2e-deployment-667b4749d4-4tjwb")
    assert [c.name for c in deployment.containers.all()] == ["compute-pi-digits"]


def test_a_pod_throttled_by_its_own_quota_with_no_container_reading_is_said_so():
    import_psi()
    # e2e-container-creating: its pod cgroup throttled in 43 of 59 periods, its one container (limit 5m) not started.
    pod = Pod.objects.get(name="e2e-container-creating")
    findings = list(Finding.objects.filter(container__pod=pod, window="1h"))
    window = findings[0] if findings else None
    end = window.window_end if window else Sample.objects.filter(container__pod=pod).latest("ts").ts
    quota = pod_quota(pod, "1h", end - timedelta(hours=1), end, findings)
    assert quota is not None
    assert (quota.window.throttled_periods, quota.window.periods) == (43, 59)
    assert quota.ceiling_mcpu == 10 and quota.throttles_beyond_containers  # 5m, but at least 1 ms per period
    assert "none of its containers reported throttling" in quota.note and "73%" in quota.note


def test_the_pod_page_shows_the_pod_cgroup_beside_its_containers(client: Client, django_user_model):
    import_psi()
    client.force_login(django_user_model.objects.create_user("ops"))
    html = client.get("/c/mk/ns/scraper/pod/e2e-container-creating/").content.decode()
    assert 'id="pod-quota"' in html and "pod-quota-alone" in html
    assert "throttled in 73% of its periods since the pod started (43 of 59)" in html
    # A pod whose container is throttled as much as the pod: said, but not as the pod's own problem.
    html = client.get("/c/mk/ns/scraper/pod/e2e-deployment-667b4749d4-4tjwb/").content.decode()
    assert 'id="pod-quota"' in html and "pod-quota-alone" not in html
    assert escape("as its containers' own quotas do (worst 100%)") in html


def test_pod_level_resources_are_read_from_the_pod_spec_and_set_the_ceiling():
    items = yaml.safe_load((PSI / "pods.yaml").read_text())["items"]
    [pod] = [p for p in items if p["metadata"]["name"] == "e2e-deployment-667b4749d4-4tjwb"]
    pod["spec"]["resources"] = {"requests": {"cpu": "100m"}, "limits": {"cpu": "250m"}}  # PodLevelResources
    [info], problems = pods_from_objects(json.loads(json.dumps([pod])))
    assert problems == [] and (info.request_mcpu, info.limit_mcpu) == (100, 250)
    assert pod_ceiling(info.limit_mcpu, [80]) == (250, "the pod's own limit (spec.resources.limits.cpu)")
    assert pod_ceiling(None, [80, 120]) == (200, "the sum of its containers' limits")
    assert pod_ceiling(None, [80, None]) == (None, "")


def test_the_pods_own_quota_is_judged_against_its_worst_container():
    from tests.advisor.test_rules import window

    pod = window(ratio=0.5)
    beyond = judge_pod_quota(pod, pod_limit_mcpu=None, container_limits=[200, 200], container_ratios=[0.1, 0.2],
                             target=0.1)  # fmt: skip
    assert beyond is not None and beyond.throttles_beyond_containers and beyond.ceiling_mcpu == 400
    assert "raise its containers' limits together" in beyond.note
    alike = judge_pod_quota(pod, pod_limit_mcpu=300, container_limits=[200], container_ratios=[0.48], target=0.1)
    assert alike is not None and not alike.throttles_beyond_containers
    assert judge_pod_quota(window(ratio=None), pod_limit_mcpu=None, container_limits=[], container_ratios=[],
                           target=0.1) is None  # fmt: skip


def test_the_pods_own_ratio_is_in_every_report_row_and_the_advice_raises_the_pods_quota_where_it_binds():
    import_psi()
    lines = pod_cgroup_lines()
    rows = {
        (row["pod"], row["container"]): row
        for finding in Finding.objects.filter(window="1h", container__pod__namespace="scraper")
        for row in [report_row(finding)]
    }
    creating = lines["e2e-container-creating"]
    [(_key, row)] = [(k, r) for k, r in rows.items() if k[0] == "e2e-container-creating"]
    assert row["pod_throttle_ratio"] == round(creating["throttled_periods_total"] / creating["periods_total"], 4)
    [pod_advice] = [r for r in row["recommendations"] if r["kind"] == "raise_pod_limit"]
    # The pod's quota is its container's 5m limit, at least 1 ms per period: 10m. The advice is the pod's, not the
    # container's: no container limit is suggested beside it.
    assert "Raise the pod's CPU limit from 10m" in pod_advice["summary"]
    assert pod_advice["suggested_pod_limit_mcpu"] > 10 and pod_advice["suggested_limit_mcpu"] is None
    assert "add up to" in pod_advice["detail"] and "no throttling is reported" in pod_advice["detail"]
    [csv_row] = [
        r
        for r in recommendation_rows(Finding.objects.filter(window="1h", container__pod__name="e2e-container-creating"))
        if r["kind"] == "raise_pod_limit"
    ]
    assert csv_row["suggested_pod_limit_mcpu"] == pod_advice["suggested_pod_limit_mcpu"]

    # Its container throttled as much as its pod: the container's own limit is the advice, not the pod's.
    deployment = lines["e2e-deployment-667b4749d4-4tjwb"]
    row = rows[("e2e-deployment-667b4749d4-4tjwb", "compute-pi-digits")]
    assert row["pod_throttle_ratio"] == round(deployment["throttled_periods_total"] / deployment["periods_total"], 4)
    assert [r["kind"] for r in row["recommendations"]][:1] != ["raise_pod_limit"]
    assert all(r["kind"] != "raise_pod_limit" for r in row["recommendations"])
    # A pod without a pod cgroup series: no figure, not 0.
    assert any(r["pod_throttle_ratio"] is None for r in rows.values())


def test_init_containers_count_in_the_pods_quota_as_the_kubelet_takes_them():
    from apps.telemetry.ingest import ingest
    from apps.telemetry.readings import Batch
    from tests import factories as f

    items = yaml.safe_load((PSI / "pods.yaml").read_text())["items"]
    [pod] = [p for p in items if p["metadata"]["name"] == "e2e-deployment-667b4749d4-4tjwb"]  # one container, 80m
    pod["spec"]["initContainers"] = [
        {"name": "mesh", "image": "proxy", "restartPolicy": "Always", "resources": {"limits": {"cpu": "50m"}}},
        {"name": "migrate", "image": "tool", "resources": {"limits": {"cpu": "200m"}}},
    ]
    [info], problems = pods_from_objects(json.loads(json.dumps([pod])))
    # The migration runs beside the sidecar started before it: 250m; running, the sidecar and the container: 130m.
    assert problems == [] and (info.init_limit_mcpu, info.init_unlimited) == (250, False)
    limits = [c.limit_mcpu for c in info.containers]
    assert sorted(limit or 0 for limit in limits) == [50, 80]
    ceiling, source = pod_ceiling(None, limits, info.init_limit_mcpu, info.init_unlimited)
    assert ceiling == 250 and source.startswith("its largest init container's limit")
    assert pod_ceiling(None, limits, 100, False) == (130, "the sum of its containers' limits")

    # Stored through the inventory as it is (both upsert paths take the same list of values).
    cluster = f.cluster("init")
    ingest(cluster, Batch(nodes=[f.node_info(info.node)], pods=[info]))
    stored = Pod.objects.get(cluster=cluster, name=info.name)
    assert (stored.init_limit_mcpu, stored.init_unlimited) == (250, False)

    # An init container without a CPU limit: a Burstable pod gets no pod-level quota at all.
    pod["spec"]["initContainers"][1]["resources"] = {}
    [info], _ = pods_from_objects(json.loads(json.dumps([pod])))
    assert info.init_unlimited and pod_ceiling(None, limits, info.init_limit_mcpu, info.init_unlimited) == (None, "")
    ingest(cluster, Batch(nodes=[f.node_info(info.node)], pods=[info]))
    assert Pod.objects.get(cluster=cluster, name=info.name).init_unlimited is True
