"""POST ingest/ with the node agent's period samples: a good one is stored and turns the advice's expected effect into
a per-period claim; hostile ones are refused with a 400 naming the field, and nothing of the batch is stored.

The payloads are the agent's own (collect() over the captured throttled v1 cgroup of tests/api/test_ingest.py) with a
period_sample added as the agent's sampler writes it: the web container has a 500m limit (quota 50,000 µs per
100,000 µs period) and 5 threads; the agent's node has os.cpu_count() CPUs, the API's node-a 8.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from apps.advisor.models import Finding
from apps.advisor.services import refresh_findings
from apps.clusters.models import Cluster
from apps.telemetry.ingest import ingest
from apps.telemetry.models import PeriodSample, Sample
from apps.telemetry.readings import Batch, ContainerInfo, NodeInfo, PodInfo
from tests import factories as f
from tests.api.test_ingest import CID_WEB, UID_WEB, build_v1_tree, collect, post, write

pytestmark = pytest.mark.django_db

# 50 periods in 5 s: 27 waited 20 ms, 3 waited 60 ms, 20 were not throttled (the agent lists only the 30).
GOOD_SAMPLE = {"seconds": 5.004, "periods": 50, "throttled_us": [20_000] * 27 + [60_000] * 3}


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return build_v1_tree(tmp_path / "cgroup")


@pytest.fixture()
def cluster() -> Cluster:
    """node-a (8 CPUs) and pod shop/web-1 with its container's runtime id and a 500m limit, as the inventory stores."""
    cluster = f.cluster("prod")
    pod = PodInfo(namespace="shop", name="web-1", uid=UID_WEB, node="node-a", qos_class="Burstable",
                  containers=(ContainerInfo(name="web", container_id=CID_WEB, request_mcpu=250, limit_mcpu=500),))  # fmt: skip
    ingest(cluster, Batch(nodes=[NodeInfo(name="node-a", capacity_mcpu=8000, kernel_version="5.10.0")], pods=[pod]))
    return cluster


@pytest.fixture()
def ingest_cluster(cluster) -> Cluster:
    return cluster


@pytest.fixture()
def pusher(client_for, ingest_key):
    return client_for(ingest_key)


def web(payload: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in payload["containers"] if c["container_id"] == CID_WEB)


def with_sample(payload: dict[str, Any], sample: Any = None) -> dict[str, Any]:
    web(payload)["period_sample"] = json.loads(json.dumps(GOOD_SAMPLE if sample is None else sample))
    payload["sampler_cpu_seconds"] = 0.061
    return payload


def test_a_period_sample_is_stored_once_with_the_quota_it_was_taken_under(pusher, cluster, tree, tmp_path):
    when = timezone.now().replace(microsecond=0) - timedelta(minutes=1)
    payload = with_sample(collect(tmp_path, when))

    response = post(pusher, payload)

    assert response.status_code == 200, response.content
    assert response.json()["period_samples_written"] == 1
    [stored] = PeriodSample.objects.all()
    assert stored.container.name == "web" and stored.collected_at == when
    assert (stored.seconds, stored.periods) == (5.004, 50)
    assert stored.throttled_us == GOOD_SAMPLE["throttled_us"]
    assert (stored.period_us, stored.quota_us) == (100_000, 50_000)  # the fixture's cfs_period_us and cfs_quota_us
    again = post(pusher, payload).json()
    assert again["period_samples_written"] == 0 and PeriodSample.objects.count() == 1


def test_a_payload_without_period_samples_stores_none(pusher, cluster, tree, tmp_path):
    response = post(pusher, collect(tmp_path, timezone.now() - timedelta(minutes=1)))
    assert response.status_code == 200 and response.json()["period_samples_written"] == 0
    assert not PeriodSample.objects.exists()


def push_a_throttled_minute(pusher, tree: Path, tmp_path: Path, sample: dict[str, Any] | None) -> None:
    """Two pushes a minute apart; the second counts 600 more periods, 360 throttled, 18 s more throttled time (as
    in test_ingest.py) and carries `sample` (None: none)."""
    assert post(pusher, collect(tmp_path, T0)).status_code == 200
    container = tree / "kubepods" / "burstable" / f"pod{UID_WEB}" / CID_WEB
    write(container, {"cpu.stat": "nr_periods 633\nnr_throttled 392\nthrottled_time 19798447421\n"})
    second = collect(tmp_path, T0 + timedelta(seconds=60))
    if sample is not None:
        with_sample(second, sample)
    assert post(pusher, second).status_code == 200


def plan(cluster: Cluster, window: str = "1h") -> dict[str, Any]:
    return Finding.objects.get(cluster=cluster, window=window).recommendations[0]


T0 = timezone.now().replace(microsecond=0) - timedelta(minutes=3)


def test_the_advice_on_a_window_with_period_samples_rests_on_the_periods(pusher, cluster, tree, tmp_path):
    push_a_throttled_minute(pusher, tree, tmp_path, GOOD_SAMPLE)

    refresh_findings(cluster, now=T0 + timedelta(seconds=90))

    # 50 sampled periods, 5 (10 %) may stay throttled: the 45th smallest waited 20 ms, plus 1 ms for each of the
    # other 4 CPUs its 5 threads can hold quota on → 500m + 24 ms per 100 ms = 740m → 750m. That adds 25 ms per
    # period: only the 3 that waited 60 ms wanted more.
    periods = plan(cluster)
    assert periods["kind"] == "raise_limit" and periods["suggested_limit_mcpu"] == 750
    assert periods["expected_basis"] == (
        "periods: 3 of 50 sampled periods wanted more than the 25 ms per period this limit adds"
    )
    assert periods["expected_throttle_ratio_max"] == pytest.approx(3 / 50)

    PeriodSample.objects.all().delete()
    refresh_findings(cluster, now=T0 + timedelta(seconds=90))
    # The same window on its totals only: a throttled period waited 18 s / 360 = 50 ms, so it wanted 1,000m; × 1.2.
    totals = plan(cluster)
    assert totals["suggested_limit_mcpu"] == 1200 and totals["expected_basis"].startswith("average:")


def test_period_samples_under_another_quota_or_outside_the_window_are_not_evidence(pusher, cluster, tree, tmp_path):
    container = tree / "kubepods" / "burstable" / f"pod{UID_WEB}" / CID_WEB
    write(container, {"cpu.cfs_quota_us": "40000\n"})  # sampled under 400m; the inventory's limit is 500m
    push_a_throttled_minute(pusher, tree, tmp_path, GOOD_SAMPLE)
    [resized] = PeriodSample.objects.all()
    assert resized.quota_us == 40_000
    # And one under the 500m quota, two hours before: outside the hour, inside the day.
    PeriodSample.objects.create(container_id=resized.container_id, collected_at=T0 - timedelta(hours=2),
                                seconds=5.0, periods=50, period_us=100_000, quota_us=50_000,
                                throttled_us=GOOD_SAMPLE["throttled_us"])  # fmt: skip

    refresh_findings(cluster, now=T0 + timedelta(seconds=90))

    assert plan(cluster, "1h")["expected_basis"].startswith("average:")
    assert plan(cluster, "24h")["expected_basis"].startswith("periods: 3 of 50 sampled periods")


# --- hostile samples --------------------------------------------------------------------------------------------------


@pytest.fixture()
def payload(cluster, tree, tmp_path) -> dict[str, Any]:
    return with_sample(collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=1)))


def index_of_web(payload: dict[str, Any]) -> int:
    return next(i for i, c in enumerate(payload["containers"]) if c["container_id"] == CID_WEB)


@pytest.mark.parametrize(
    ("sample", "path", "message"),
    [
        ("all of them", "period_sample", "Invalid data. Expected a dictionary"),
        (dict(GOOD_SAMPLE, throttled_us="20000"), "period_sample.throttled_us", "period_sample.throttled_us must be a list"),
        (dict(GOOD_SAMPLE, throttled_us=[20_000, -1]), "period_sample.throttled_us", "period_sample.throttled_us[1] = -1 is not"),
        (dict(GOOD_SAMPLE, throttled_us=[20_000.5]), "period_sample.throttled_us", "period_sample.throttled_us[0] = 20000.5 is not"),
        (dict(GOOD_SAMPLE, throttled_us=[True]), "period_sample.throttled_us", "period_sample.throttled_us[0] = True is not"),
        (dict(GOOD_SAMPLE, throttled_us=["1"]), "period_sample.throttled_us", "period_sample.throttled_us[0] = '1' is not"),
        (dict(GOOD_SAMPLE, throttled_us=[2**64]), "period_sample.throttled_us", "period_sample.throttled_us[0] = 18446744073709551616 is not"),
        (dict(GOOD_SAMPLE, throttled_us=[0] * 60_003), "period_sample.throttled_us", "period_sample.throttled_us lists 60003 periods: at most 60002"),
        (dict(GOOD_SAMPLE, throttled_us=[1] * 51), "period_sample.throttled_us", "period_sample.throttled_us lists 51 periods but periods is 50"),
        (dict(GOOD_SAMPLE, periods=53), "period_sample.periods", "period_sample.periods 53 is more than 52, the periods of 100000 us"),
        (dict(GOOD_SAMPLE, periods=-1), "period_sample.periods", "period_sample.periods must be a whole number from 0"),
        (dict(GOOD_SAMPLE, periods="50"), "period_sample.periods", "period_sample.periods must be a whole number from 0"),
        (dict(GOOD_SAMPLE, seconds=0), "period_sample.seconds", "period_sample.seconds must be a number of seconds"),
        (dict(GOOD_SAMPLE, seconds=3600), "period_sample.seconds", "period_sample.seconds must be a number of seconds"),
        ({"seconds": 5.0, "periods": 50}, "period_sample.throttled_us", "This field is required."),
    ],
)  # fmt: skip
def test_a_bad_period_sample_is_a_400_naming_the_field_and_nothing_is_stored(pusher, payload, sample, path, message):
    index = index_of_web(payload)
    web(payload)["period_sample"] = sample
    response = post(pusher, payload)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert errors.get(f"containers[{index}].{path}", [""])[0].startswith(message), errors
    assert not Sample.objects.exists() and not PeriodSample.objects.exists()


def test_a_period_that_waited_longer_than_every_cpu_of_the_node_is_refused(pusher, payload):
    cpus = payload["node"]["capacity_mcpu"] // 1000  # the agent's node: this machine's CPUs
    index = index_of_web(payload)
    web(payload)["period_sample"]["throttled_us"][4] = 100_000 * cpus + 1
    response = post(pusher, payload)
    assert response.status_code == 400
    [message] = response.json()["errors"][f"containers[{index}].period_sample.throttled_us"]
    assert message.startswith(f"period_sample.throttled_us[4] = {100_000 * cpus + 1} us is more than period_us × node")
    assert not Sample.objects.exists() and not PeriodSample.objects.exists()


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (lambda p: web(p).update(period_us=None), "period_sample", "period_sample needs the container's period_us"),
        (lambda p: p.update(sampler_cpu_seconds=-0.1), "sampler_cpu_seconds", "sampler_cpu_seconds must be"),
        (lambda p: p.update(sampler_cpu_seconds="0.1"), "sampler_cpu_seconds", "sampler_cpu_seconds must be"),
        (lambda p: p.update(sampler_cpu_seconds=1e9), "sampler_cpu_seconds", "sampler_cpu_seconds must be"),
        (
            lambda p: p.update(containers=[dict(web(p), container_id=f"{i:064x}") for i in range(65)]),
            "containers",
            "at most 64 containers per batch carry a period_sample.",
        ),
    ],
)
def test_a_period_sample_the_batch_cannot_back_is_a_400(pusher, payload, change, key, message):
    index = index_of_web(payload)
    change(payload)
    key = key if key != "period_sample" else f"containers[{index}].period_sample"
    response = post(pusher, payload)
    assert response.status_code == 400, response.content
    assert response.json()["errors"].get(key, [""])[0].startswith(message), response.json()
    assert not Sample.objects.exists() and not PeriodSample.objects.exists()
