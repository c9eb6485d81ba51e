"""/metrics: cputune's findings and collection health, parsed with prometheus_client's own parsers."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from apps.advisor.models import Finding
from apps.collector.models import CollectionRun

pytestmark = pytest.mark.django_db

T1 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def scrape(client, **headers) -> dict[str, list[Sample]]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {family.name: family.samples for family in text_string_to_metric_families(response.content.decode())}


def by_pod(samples: list[Sample]) -> dict[str, Sample]:
    return {s.labels["pod"]: s for s in samples}


def test_throttle_ratio_per_container_labelled_with_the_container_only(reader, demo):
    ratio = by_pod(scrape(reader)["cputune_container_throttle_ratio"])
    api = ratio["api-0"]
    assert api.labels == {"cluster": "demo", "namespace": "shop", "pod": "api-0", "container": "main"}
    assert api.value == pytest.approx(0.6)
    assert ratio["web-0"].value == 0 and set(ratio["web-0"].labels) == {"cluster", "namespace", "pod", "container"}
    # No quota, no ratio: left out rather than exported as 0.
    assert "cache-0" not in ratio and "batch-0" not in ratio


def advice_of(families: dict[str, list[Sample]]) -> dict[str, set[tuple[str, str]]]:
    """(kind, severity) pairs per pod, from the recommendation series (each checked to be 1, labelled as a ratio)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for sample in families["cputune_container_recommendation"]:
        assert sample.value == 1
        assert set(sample.labels) == {"cluster", "namespace", "pod", "container", "kind", "severity"}
        out.setdefault(sample.labels["pod"], set()).add((sample.labels["kind"], sample.labels["severity"]))
    return out


def test_one_recommendation_series_per_container_and_kind_with_its_severity(reader, demo):
    advice = advice_of(scrape(reader))
    stored = {
        f.container.pod.name: {(r["kind"], r["severity"]) for r in f.recommendations}
        for f in Finding.objects.filter(cluster=demo, window="1h").select_related("container__pod")
        if f.recommendations
    }
    assert advice == stored
    assert ("raise_limit", "critical") in advice["api-0"]
    assert advice["cache-0"] == {("lower_request", "info")}  # no ratio, yet its advice is exported
    assert "web-0" not in advice  # healthy: no series at all


def test_the_ratio_series_is_the_same_series_when_the_advice_changes(reader, demo):
    before = scrape(reader)
    finding = Finding.objects.get(container__pod__name="api-0", window="1h")
    finding.recommendations = [r for r in finding.recommendations if r["kind"] != "raise_limit"]
    finding.kinds = "," + ",".join(r["kind"] for r in finding.recommendations) + ","
    finding.save()
    after = scrape(reader)
    labels = [[s.labels for s in families["cputune_container_throttle_ratio"]] for families in (before, after)]
    assert labels[0] == labels[1]
    assert "raise_limit" in {kind for kind, _ in advice_of(before)["api-0"]}
    assert "raise_limit" not in {kind for kind, _ in advice_of(after)["api-0"]}


def test_a_kind_listed_twice_is_exported_once(reader, demo):
    finding = Finding.objects.get(container__pod__name="api-0", window="1h")
    finding.recommendations = [*finding.recommendations, finding.recommendations[0]]
    finding.save()
    series = [s for s in scrape(reader)["cputune_container_recommendation"] if s.labels["pod"] == "api-0"]
    assert len(series) == len({s.labels["kind"] for s in series})


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install prometheus)")
@pytest.mark.parametrize("accept", ["text/plain;version=0.0.4", "application/openmetrics-text; version=1.0.0"])
def test_promtool_accepts_the_exposition(reader, demo, accept):
    assert PROMTOOL is not None
    body = reader.get("/metrics", HTTP_ACCEPT=accept).content
    checked = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_usage_limit_and_request_in_millicores(reader, demo):
    families = scrape(reader)
    usage = by_pod(families["cputune_container_cpu_usage_p95_millicores"])
    limit = by_pod(families["cputune_container_cpu_limit_millicores"])
    request = by_pod(families["cputune_container_cpu_request_millicores"])
    assert usage["api-0"].value == pytest.approx(490.0) and usage["cache-0"].value == pytest.approx(30.0)
    assert limit["api-0"].value == 500 and request["api-0"].value == 250
    assert "cache-0" not in limit and request["cache-0"].value == 2000  # no limit: no sample
    assert "batch-0" not in request  # BestEffort


def test_collection_health_per_cluster(reader, demo):
    CollectionRun.objects.create(cluster=demo, source="kubernetes", started_at=T1, finished_at=T1 + timedelta(seconds=3),
                                 status="ok", nodes_total=2, nodes_ok=2)  # fmt: skip
    later = T1 + timedelta(minutes=1)
    CollectionRun.objects.create(cluster=demo, source="kubernetes", started_at=later,
                                 finished_at=later + timedelta(seconds=5.5), status="failed", nodes_total=2,
                                 nodes_failed=2)  # fmt: skip
    families = scrape(reader)
    [last_success] = families["cputune_collection_last_success_timestamp_seconds"]
    assert last_success.labels == {"cluster": "demo"}
    assert last_success.value == (T1 + timedelta(seconds=3)).timestamp()  # the failed run is not a success
    nodes = {s.labels["outcome"]: s.value for s in families["cputune_collection_last_run_nodes"]}
    assert nodes == {"ok": 0, "failed": 2}
    [duration] = families["cputune_collection_last_run_duration_seconds"]
    assert duration.value == pytest.approx(5.5)


def test_a_cluster_that_never_collected_has_no_health_samples(reader, demo):
    families = scrape(reader)
    assert families["cputune_collection_last_success_timestamp_seconds"] == []
    assert families["cputune_collection_last_run_nodes"] == []


def test_openmetrics_when_the_scraper_asks_for_it(reader, demo):
    response = reader.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response["Content-Type"].startswith("application/openmetrics-text")
    names = {family.name for family in openmetrics_families(response.content.decode())}
    assert {"cputune_container_throttle_ratio", "cputune_container_recommendation"} <= names


def test_prometheus_default_accept_header_gets_the_text_format(reader, demo):
    accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"
    families = scrape(reader, HTTP_ACCEPT="text/plain;version=0.0.4")
    assert "cputune_container_throttle_ratio" in families
    assert reader.get("/metrics", HTTP_ACCEPT=accept).status_code == 200


def test_each_scrape_reads_the_database_again(reader, demo):
    assert by_pod(scrape(reader)["cputune_container_throttle_ratio"])["api-0"].value == pytest.approx(0.6)
    Finding.objects.filter(container__pod__name="api-0", window="1h").update(throttle_ratio=0.25)
    assert by_pod(scrape(reader)["cputune_container_throttle_ratio"])["api-0"].value == pytest.approx(0.25)


def test_metrics_need_a_read_token_or_a_session(client_for, ingest_key, demo):
    assert client_for(None).get("/metrics").status_code == 401
    denied = client_for(ingest_key).get("/metrics")
    assert denied.status_code == 403 and denied["Content-Type"] == "application/json"
