"""One validator at every entry: names a Kubernetes cluster cannot have and period counts that contradict each other
are refused where readings enter (every source — API push, agent, dump, Prometheus, lab — goes through `ingest`),
and the migrations repair what was stored before.

On aec48c8 a dump with periods 10 and throttled 290 stored a ratio of 29.0, and a namespace with a '/' broke pages.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.apps import apps as django_apps

from apps.advisor.models import Finding
from apps.clusters.models import Container, Pod
from apps.collector.dump import import_dump
from apps.telemetry.ingest import ingest, ingest_readings
from apps.telemetry.models import HourlyRollup, Sample, SeriesHead
from apps.telemetry.readings import Batch, ContainerInfo
from tests import factories as f

pytestmark = pytest.mark.django_db
DUMP = Path(__file__).parent.parent / "fixtures" / "clusters" / "k8s-1.33-minikube"


def test_a_dump_with_more_throttled_periods_than_periods_stores_no_ratio_above_one(tmp_path):
    """php-apache's real line says periods 9, throttled 3; forged to periods 10, throttled 290."""
    text = (DUMP / "cadvisor.txt").read_text()
    lines = []
    for line in text.splitlines():
        if 'container="php-apache"' in line:
            name, value = line.split("{", 1)[0], line.rsplit("}", 1)[1].split()
            forged = {"container_cpu_cfs_periods_total": "10", "container_cpu_cfs_throttled_periods_total": "290"}
            if name in forged:
                line = f"{line.rsplit('}', 1)[0]}}} {forged[name]} {' '.join(value[1:])}"
        lines.append(line)
    scrape = tmp_path / "cadvisor.txt"
    scrape.write_text("\n".join(lines) + "\n")
    node = yaml.safe_load((DUMP / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]

    result = import_dump("mk", DUMP / "nodes.yaml", DUMP / "pods.yaml", {node: scrape})

    sample = Sample.objects.get(container__name="php-apache")
    assert (sample.periods_total, sample.throttled_periods_total) == (None, None)
    assert sample.usage_seconds_total == pytest.approx(0.171685)  # the reading's other counters are kept
    assert any("throttled periods (290) exceed periods (10); both dropped" in p for p in result.problems)
    assert Finding.objects.get(container__name="php-apache", window="1h").throttle_ratio is None
    ratios = Finding.objects.exclude(throttle_ratio=None).values_list("throttle_ratio", flat=True)
    assert ratios and all(r is not None and 0 <= r <= 1 for r in ratios)


@pytest.fixture()
def web():
    cluster = f.cluster()
    ingest(cluster, Batch(nodes=[f.node_info()], pods=[f.pod_info()]))
    return cluster


@pytest.mark.parametrize("method", ["bulk_create", pytest.param("sql", marks=pytest.mark.postgres)])
def test_an_interval_counting_more_throttled_periods_than_periods_gives_no_period_deltas(web, method):
    """Counters reset out of step (or forged): 10 more periods but 40 more throttled ones. Both paths agree."""
    first = f.reading(0, periods=100, throttled=10, usage_s=5.0)
    second = f.reading(1, periods=110, throttled=50, usage_s=6.0)
    third = f.reading(2, periods=130, throttled=55, usage_s=7.0)

    ingest_readings(web, [first, second, third], now=f.T0 + timedelta(minutes=3), method=method)

    deltas = list(Sample.objects.order_by("ts").values_list("periods_delta", "throttled_periods_delta"))
    assert deltas == [(None, None), (None, None), (20, 5)]
    usage = Sample.objects.order_by("ts").values_list("usage_seconds_delta", flat=True)
    assert list(usage)[1:] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_a_reading_with_more_throttled_periods_than_periods_keeps_its_other_counters(web):
    result = ingest_readings(web, [f.reading(0, periods=0, throttled=40, usage_s=2.0)], now=f.T0)

    [sample] = Sample.objects.all()
    assert (sample.periods_total, sample.throttled_periods_total, sample.usage_seconds_total) == (None, None, 2.0)
    assert result.problems == [
        "shop/web-1/c0 at 2026-11-30 09:00:00+00:00: throttled periods (40) exceed periods (0); both dropped"
    ]


@pytest.mark.parametrize(
    ("field", "name", "why"),
    [
        ("namespace", "+cmd|' /C calc'!A0", "is not a Kubernetes namespace name"),
        ("namespace", "shop\r\nSet-Cookie: x=1", "is not a Kubernetes namespace name"),
        ("pod", "web/1", "is not a Kubernetes pod name"),
        ("pod", "Web-1", "is not a Kubernetes pod name"),
        ("container", "c_0", "is not a Kubernetes container name"),
        ("namespace", "n" * 64, "is 64 characters long, more than the 63 stored"),
    ],
)
def test_readings_with_names_no_cluster_can_have_are_refused_each_with_a_problem(web, field, name, why):
    good = f.reading(0, periods=10, throttled=1, usage_s=1.0)
    bad = replace(good, **{field: name})

    result = ingest_readings(web, [good, bad], now=f.T0)

    assert Sample.objects.count() == 1
    [problem] = result.problems
    assert why in problem and problem.endswith("not stored")
    assert "\r" not in problem and "\n" not in problem


def test_inventory_objects_with_impossible_names_are_refused_and_the_rest_stored():
    cluster = f.cluster()
    bad_pod = replace(f.pod_info("web-2"), name="web/2")
    bad_container = replace(f.pod_info("web-3"), containers=(ContainerInfo(name="App", container_id="ab" * 32),))
    bad_namespace = replace(f.pod_info("web-4"), namespace="Shop")

    result = ingest(
        cluster,
        Batch(nodes=[f.node_info(), f.node_info("node_b")], pods=[f.pod_info(), bad_pod, bad_container, bad_namespace]),
    )

    assert sorted(Pod.objects.values_list("namespace", "name")) == [("shop", "web-1"), ("shop", "web-3")]
    assert list(Container.objects.filter(pod__name="web-3")) == []
    assert cluster.nodes.get().name == "node-a"
    assert len([p for p in result.problems if "is not a Kubernetes" in p]) == 4


def test_the_migrations_repair_impossible_counts_and_remove_impossible_names(web):
    ingest_readings(web, [f.reading(m, periods=10 * m, throttled=m, usage_s=m) for m in range(3)], now=f.T0)
    Sample.objects.filter(ts=f.T0 + timedelta(minutes=1)).update(
        throttled_periods_total=290, throttled_periods_delta=90
    )
    SeriesHead.objects.update(throttled_periods_total=290)
    cid = Container.objects.get().pk
    HourlyRollup.objects.create(
        container_id=cid, hour=f.T0, samples=3, covered_seconds=120, periods=20, throttled_periods=30
    )
    HourlyRollup.objects.create(
        container_id=cid,
        hour=f.T0 - timedelta(hours=1),
        samples=3,
        covered_seconds=120,
        periods=20,
        throttled_periods=3,
    )
    Pod.objects.filter(name="web-1").update(namespace="a/b")
    ingest(web, Batch(pods=[f.pod_info("web-9")]))

    importlib.import_module("apps.telemetry.migrations.0003_repair_period_counts").repair(django_apps, None)
    assert SeriesHead.objects.values_list("periods_total", "throttled_periods_total").get(container_id=cid) == (
        None,
        None,
    )
    importlib.import_module("apps.clusters.migrations.0002_remove_impossible_names").remove(django_apps, None)

    rows = list(
        Sample.objects.order_by("ts").values_list(
            "periods_total", "throttled_periods_total", "periods_delta", "throttled_periods_delta"
        )
    )
    assert rows == [(0, 0, None, None), (None, None, None, None), (20, 2, 10, 1)]
    assert list(HourlyRollup.objects.order_by("hour").values_list("periods", "throttled_periods")) == [
        (20, 3),
        (None, None),
    ]
    assert list(Pod.objects.values_list("namespace", "name")) == [("shop", "web-9")]
    assert not SeriesHead.objects.filter(container_id=cid).exists()  # went with its container
