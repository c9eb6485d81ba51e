"""Every page through the Django test client: what a logged-in user sees, 404s for unknown names, 400s for bad queries.

Expected figures come from the builder's patterns (tests/builders.py) and the kubelet's arithmetic, worked out here:
node allocatable 15,800m; on each node one pod of each pattern → shares 256 (api 250m) + 102 (worker 100m) +
2048 (cache 2000m) + 2 (batch, no request) + 512 (web 500m) = 2,920; api's floor = 15,800 × 256 / 2,920 = 1,385m.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from datetime import UTC, timedelta
from html import escape

import pytest
from django.test import Client
from django.utils import timezone

from apps.advisor.models import Finding
from apps.advisor.selectors import RECOMMENDATION_FIELDS
from apps.clusters.models import Cluster, Container, Node
from apps.collector.models import CollectionProblem, CollectionRun
from tests.builders import build_cluster

pytestmark = pytest.mark.django_db

NS = "/c/demo/ns/shop/"


def report_pods(html: bytes) -> list[str]:
    """The pod of every report row, in page order."""
    return re.findall(r'<tr data-pod="([^"]+)"', html.decode())


def found(pattern: str, text: str) -> str:
    """The first group of `pattern` in `text`; fails the test when it is not there."""
    match = re.search(pattern, text, re.S)
    assert match, f"{pattern!r} is not on the page"
    return match.group(1)


def chart(html: bytes, chart_id: str) -> dict:
    match = re.search(rf'<script type="application/json" id="{chart_id}">(.*?)</script>', html.decode(), re.S)
    assert match, f"no chart {chart_id} on the page"
    return json.loads(match.group(1))


def csv_rows(response) -> list[dict[str, str]]:
    body = b"".join(response.streaming_content).decode()
    reader = csv.DictReader(io.StringIO(body))
    assert reader.fieldnames == list(RECOMMENDATION_FIELDS)
    return list(reader)


# --- login -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/", "/c/demo/", NS, f"{NS}pod/api-0/", "/c/demo/node/demo-node-0/", f"{NS}recommendations.csv"]
)
def test_every_page_sends_an_anonymous_visitor_to_the_login_form(client: Client, demo: Cluster, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_logging_in_through_the_form_needs_the_csrf_token(user, demo: Cluster) -> None:
    strict = Client(enforce_csrf_checks=True)
    refused = strict.post("/accounts/login/", {"username": "ops", "password": "a-long-password-1"})
    assert refused.status_code == 403
    page = strict.get("/accounts/login/")
    token = found(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    accepted = strict.post(
        "/accounts/login/", {"username": "ops", "password": "a-long-password-1", "csrfmiddlewaretoken": token}
    )
    assert accepted.status_code == 302 and accepted["Location"] == "/"


# --- overview ----------------------------------------------------------------------------------------------------


def test_overview_without_clusters_says_how_to_register_one(ops: Client) -> None:
    Cluster.objects.all().delete()  # the module's shared cluster comes back when this test's transaction rolls back
    response = ops.get("/")
    assert response.status_code == 200
    assert b"No cluster is registered yet" in response.content
    assert b"manage.py add_cluster" in response.content


def test_overview_lists_clusters_with_their_last_collection_and_its_problems(ops: Client, demo: Cluster) -> None:
    now = timezone.now()
    CollectionRun.objects.create(cluster=demo, source="kubernetes", started_at=now - timedelta(minutes=5), status="ok")
    last = CollectionRun.objects.create(
        cluster=demo,
        source="kubernetes",
        started_at=now - timedelta(seconds=30),
        status="partial",
        nodes_total=3,
        nodes_ok=2,
        nodes_failed=1,
    )
    CollectionProblem.objects.create(run=last, node="demo-node-9", message="scrape timed out after 20 s")
    Cluster.objects.create(name="staging")
    html = ops.get("/").content.decode()
    assert 'href="/c/demo/"' in html and 'href="/c/staging/"' in html
    assert "30 s ago" in html and "partial (some nodes failed)" in html
    assert 'href="/c/demo/#runs">1 problem</a>' in html
    # The cluster that never ran says when its first collection comes, and how to run one now.
    assert "no data yet" in html and "collect --cluster staging --once" in html


def test_overview_flags_a_cluster_whose_collection_is_overdue(ops: Client, demo: Cluster, settings) -> None:
    settings.CPUTUNE_COLLECT_INTERVAL = 60
    CollectionRun.objects.create(
        cluster=demo, source="kubernetes", started_at=timezone.now() - timedelta(minutes=10), status="ok"
    )
    assert b"is a worker running?" in ops.get("/").content


def test_overview_ranks_the_most_throttled_workloads_across_clusters(ops: Client, demo: Cluster) -> None:
    html = ops.get("/").content.decode()
    table = html[html.index('id="workloads"') :]
    # api runs at its ceiling throttled in 60% of periods, worker in 40%; cache, web and batch are not throttled.
    assert table.index(">api</a>") < table.index(">worker</a>")
    assert ">cache</a>" not in table and ">web</a>" not in table
    assert "60%" in table and "40%" in table


def test_overview_counts_nodes_by_kernel_verdict(ops: Client, demo: Cluster) -> None:
    build_cluster("fixedc", per_pattern=1, minutes=5, kernel="5.10.12")  # mainline ≥ 5.4: fixed
    build_cluster("oldc", per_pattern=1, minutes=5, kernel="4.14.100")  # 4.14.95 ≤ x < 4.14.154: affected
    html = ops.get("/").content.decode()
    counts = dict(re.findall(r'data-verdict="(\w+)"><span class="tile-n">(\d+)<', html))
    assert counts == {"fixed": "2", "affected": "2", "unknown": "2"}


# --- cluster -----------------------------------------------------------------------------------------------------


def test_cluster_page_lists_namespaces_with_counts_over_target_and_worst_ratio(ops: Client, demo: Cluster) -> None:
    html = ops.get("/c/demo/").content.decode()
    rows = re.findall(r'<a href="/c/demo/ns/(\w+)/\?window=1h"><strong>\w+</strong></a></td>\s*'
                      r'<td class="num">(\d+)</td>\s*<td class="num">(?:<span class="crit-text">)?(\d+)', html)  # fmt: skip
    # shop: api×2, worker×2, cache×2, web×2 = 8 containers, api and worker (4) over the 10% target.
    assert rows == [("shop", "8", "4"), ("batch", "2", "0")]
    assert "60%" in html


def test_cluster_page_shows_nodes_with_kernel_verdicts_and_runs_with_problems(ops: Client, demo: Cluster) -> None:
    run = CollectionRun.objects.create(cluster=demo, source="kubernetes", started_at=timezone.now(), status="failed")
    CollectionProblem.objects.create(run=run, node="demo-node-1", message="connection refused by kubelet")
    html = ops.get("/c/demo/").content.decode()
    assert 'href="/c/demo/node/demo-node-0/"' in html and "4.19.76-linuxkit" in html
    assert "verdict-unknown" in html  # a linuxkit 4.19.76 base is below the 4.19.84 fix with no vendor record
    assert 'id="runs"' in html and "connection refused by kubelet" in html


def test_cluster_page_without_collections_says_so(ops: Client) -> None:
    Cluster.objects.create(name="fresh")
    html = ops.get("/c/fresh/").content.decode()
    assert "No data yet" in html and "collect --cluster fresh --once" in html


# --- namespace report --------------------------------------------------------------------------------------------


def test_namespace_report_has_a_row_per_container_worst_first(ops: Client, demo: Cluster) -> None:
    response = ops.get(NS)
    assert response.status_code == 200
    pods = report_pods(response.content)
    assert len(pods) == 8
    assert set(pods[:2]) == {"api-0", "api-1"} and set(pods[2:4]) == {"worker-0", "worker-1"}
    html = response.content.decode()
    for figure in ("250m", "500m", "1,385m", "490m", "60%", "0.30"):
        assert figure in html
    assert 'class="badge sev-critical" title="Raise the CPU limit from 500m to 1,200m' in html
    assert "Download CSV" in html


def test_namespace_report_shows_unknown_numbers_as_a_dash_not_zero(ops: Client, demo: Cluster) -> None:
    html = ops.get(f"{NS}?workload=cache").content.decode()
    row = html[html.index('data-pod="cache-0"') :].split("</tr>")[0]
    cells = re.findall(r'<td class="num[^"]*"[^>]*>([^<]*)', row)
    # request 2000m; no limit → no ceiling, no periods → no ratio and no throttled seconds.
    assert cells[:2] == ["2,000m", "—"] and "—" in cells[4:]
    assert ">0%<" not in row


@pytest.mark.parametrize(
    ("sort", "first"),
    [("pod", "api-0"), ("-pod", "worker-1"), ("usage_p95_mcpu", "cache-0"), ("-request_mcpu", "cache-0")],
)
def test_namespace_report_sorts_by_the_main_columns(ops: Client, demo: Cluster, sort: str, first: str) -> None:
    pods = report_pods(ops.get(f"{NS}?sort={sort}").content)
    assert pods[0] == first
    assert len(pods) == 8


def test_sorting_by_ratio_puts_unknown_ratios_last_both_ways(ops: Client, demo: Cluster) -> None:
    ascending = report_pods(ops.get(f"{NS}?sort=throttle_ratio").content)
    assert set(ascending[:2]) == {"web-0", "web-1"} and set(ascending[-2:]) == {"cache-0", "cache-1"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kind=cut_threads", {"api-0", "api-1", "worker-0", "worker-1"}),
        ("kind=lower_request", {"cache-0", "cache-1"}),
        ("min_throttle_ratio=0.5", {"api-0", "api-1"}),
        ("node=demo-node-1", {"api-1", "worker-1", "cache-1", "web-1"}),
        ("workload=web", {"web-0", "web-1"}),
        ("kind=cut_threads&min_throttle_ratio=0.5&node=demo-node-0", {"api-0"}),
    ],
)
def test_namespace_report_filters(ops: Client, demo: Cluster, query: str, expected: set[str]) -> None:
    assert set(report_pods(ops.get(f"{NS}?{query}").content)) == expected


def test_a_filter_that_matches_nothing_says_so_and_offers_to_clear(ops: Client, demo: Cluster) -> None:
    html = ops.get(f"{NS}?min_throttle_ratio=0.99").content.decode()
    assert "No container matches these filters" in html and "Clear the filters" in html


def test_namespace_report_pages_by_100(ops: Client, db: None) -> None:
    build_cluster("big", per_pattern=25, minutes=3)  # shop: 4 patterns × 25 = 100 containers; add one more page
    build_cluster("big2", per_pattern=26, minutes=3)  # 104 containers in shop
    first = ops.get("/c/big2/ns/shop/")
    second = ops.get("/c/big2/ns/shop/?page=2")
    assert len(report_pods(first.content)) == 100 and len(report_pods(second.content)) == 4
    assert b"Page 1 of 2" in first.content and b'rel="next"' in first.content
    assert not set(report_pods(first.content)) & set(report_pods(second.content))
    assert b"Page 1 of 2" not in ops.get("/c/big/ns/shop/").content  # exactly 100: one page, no pager
    # Past the last page: the last page, not an error.
    assert report_pods(ops.get("/c/big2/ns/shop/?page=9").content) == report_pods(second.content)


def test_namespace_report_runs_a_fixed_number_of_queries(ops: Client, db: None, django_assert_max_num_queries) -> None:
    build_cluster("many", per_pattern=30, minutes=3)  # 120 containers in shop: more than a page
    ops.get("/c/many/ns/shop/")  # warm the session
    # session, user, the user's read grants, cluster, summary, page count, filter choices, the page's rows, the recent
    # changes (none here): 9 however many rows there are.
    with django_assert_max_num_queries(9):
        response = ops.get("/c/many/ns/shop/?sort=-usage_p95_mcpu&window=1h")
    assert len(report_pods(response.content)) == 100


def test_namespace_report_window_picker_reads_the_longer_windows(ops: Client, demo: Cluster) -> None:
    for window in ("24h", "7d"):
        html = ops.get(f"{NS}?window={window}").content.decode()
        assert len(report_pods(html.encode())) == 8
        assert f'href="?window={window}" aria-current="true"' in html


def test_lifetime_rows_say_lifetime_instead_of_a_window(ops: Client, db: None) -> None:
    cluster = build_cluster("once", per_pattern=1, minutes=0)  # one reading per container: lifetime counters
    lifetime = set(
        Finding.objects.filter(cluster=cluster, window="1h", window_start__isnull=True).values_list(
            "container__pod__name", flat=True
        )
    )
    assert lifetime == {"api-0", "worker-0", "web-0"}  # the containers with CFS counters (a limit)
    html = ops.get("/c/once/ns/shop/").content.decode()
    for pod in ("api-0", "worker-0", "web-0", "cache-0"):
        row = html[html.index(f'data-pod="{pod}"') :].split("</tr>")[0]
        assert (">lifetime</span>" in row) == (pod in lifetime)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("window=2w", "window '2w'"),
        ("sort=evil", "sort 'evil'"),
        ("min_throttle_ratio=abc", "min_throttle_ratio must be a number"),
        ("min_throttle_ratio=1.5", "between 0 and 1"),
        ("min_throttle_ratio=nan", "min_throttle_ratio must be a number"),
        ("page=x", "page must be a whole number"),
        ("page=0", "page must be a whole number"),
        ("kind=everything", "kind 'everything'"),
    ],
)
def test_bad_report_queries_are_a_400_naming_the_value(ops: Client, demo: Cluster, query: str, named: str) -> None:
    response = ops.get(f"{NS}?{query}")
    assert response.status_code == 400
    assert named in response.content.decode().replace("&#x27;", "'")


@pytest.mark.parametrize(
    "url",
    [
        "/c/nowhere/",
        "/c/nowhere/ns/shop/",
        "/c/demo/ns/nowhere/",
        "/c/demo/ns/shop/pod/nowhere/",
        "/c/demo/ns/batch/pod/api-0/",  # a pod of another namespace
        "/c/demo/node/nowhere/",
        "/c/demo/ns/nowhere/recommendations.csv",
        "/c/nowhere/recommendations.csv",
    ],
)
def test_unknown_names_are_a_404(ops: Client, demo: Cluster, url: str) -> None:
    assert ops.get(url).status_code == 404


@pytest.mark.parametrize(
    "url", ["/c/demo/?window=2w", f"{NS}pod/api-0/?window=2w", "/c/demo/node/demo-node-0/?window=1y"]
)
def test_a_bad_window_on_any_page_is_a_400(ops: Client, demo: Cluster, url: str) -> None:
    assert ops.get(url).status_code == 400


# --- CSV ---------------------------------------------------------------------------------------------------------


def test_namespace_csv_has_one_row_per_container_and_recommendation(ops: Client, demo: Cluster) -> None:
    response = ops.get(f"{NS}recommendations.csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="cputune-demo-shop-1h-recommendations.csv"' in response["Content-Disposition"]
    rows = csv_rows(response)
    # One plan each. api: raise_limit, cut_threads (whole cores would only round the raise up under policy none);
    # worker: cut_threads, use_whole_cores; cache: lower_request.
    assert len(rows) == 2 * 2 + 2 * 2 + 2 * 1
    raise_limit = next(r for r in rows if r["pod"] == "api-0" and r["kind"] == "raise_limit")
    # A throttled period wanted 500m + 50 ms per 100 ms of throttled time = 1,000m; × 1.2 headroom = 1,200m.
    assert raise_limit["suggested_limit_mcpu"] == "1200"
    assert raise_limit["throttle_ratio"] == "0.6" and raise_limit["severity"] == "critical"
    lower = next(r for r in rows if r["pod"] == "cache-0")
    assert lower["limit_mcpu"] == "" and lower["throttle_ratio"] == ""  # unknown is empty, never 0


def test_namespace_csv_rows_carry_their_window_and_the_kubectl_line(ops: Client, demo: Cluster) -> None:
    rows = csv_rows(ops.get(f"{NS}recommendations.csv", {"window": "24h"}))
    finding = Finding.objects.get(cluster=demo, window="24h", container__pod__name="api-0")
    raise_limit = next(r for r in rows if r["pod"] == "api-0" and r["kind"] == "raise_limit")
    assert finding.window_start is not None
    assert raise_limit["window_start"] == finding.window_start.isoformat()
    assert raise_limit["window_end"] == finding.window_end.isoformat()
    assert raise_limit["computed_at"] == finding.computed_at.isoformat()
    assert raise_limit["periods"] == str(finding.periods)
    assert raise_limit["kubectl_command"] == "kubectl set resources deployment/api -c main --limits=cpu=1200m -n shop"
    assert next(r for r in rows if r["kind"] == "cut_threads")["kubectl_command"] == ""  # nothing to set
    lower = next(r for r in csv_rows(ops.get(f"{NS}recommendations.csv")) if r["pod"] == "cache-0")
    assert lower["kubectl_command"] == (
        f"kubectl set resources statefulset/cache -c main --requests=cpu={lower['suggested_request_mcpu']}m -n shop"
    )


def test_namespace_csv_follows_the_page_filters(ops: Client, demo: Cluster) -> None:
    rows = csv_rows(ops.get(f"{NS}recommendations.csv?kind=cut_threads&min_throttle_ratio=0.5"))
    assert {(r["pod"], r["kind"]) for r in rows} == {("api-0", "cut_threads"), ("api-1", "cut_threads")}


def test_cluster_csv_covers_every_namespace(ops: Client, demo: Cluster) -> None:
    rows = csv_rows(ops.get("/c/demo/recommendations.csv"))
    assert {r["namespace"] for r in rows} == {"shop", "batch"}
    assert [r["kind"] for r in rows if r["namespace"] == "batch"] == ["set_request", "set_request"]


def test_the_download_link_carries_the_filters_but_not_the_page(ops: Client, demo: Cluster) -> None:
    html = ops.get(f"{NS}?kind=cut_threads&page=1").content.decode()
    link = found(r'id="download-csv" href="([^"]+)"', html)
    assert link == f"{NS}recommendations.csv?kind=cut_threads"


# --- pod ---------------------------------------------------------------------------------------------------------


def test_pod_page_explains_and_recommends_with_copyable_changes(ops: Client, demo: Cluster) -> None:
    response = ops.get(f"{NS}pod/api-0/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Floor: its request of 250m becomes 256 cpu.shares" in html  # the explanation, one <p> per paragraph
    assert html.count("<p>Why ") == 2
    assert "kubectl set resources deployment/api -c main --limits=cpu=1200m -n shop" in html
    # One plan: no second limit for the same container (whole cores at 1,000m used to stand beside a raise).
    assert "--limits=cpu=1000m" not in html
    assert "- name: main\n  resources:\n    limits:\n      cpu: 1200m" in html
    assert html.count('class="copy"') == 2  # kubectl + YAML for the one recommendation with numbers
    # The builder's nodes report no kubelet version: no in-place resize, and the page says why.
    assert "No in-place resize: in-place resize needs Kubernetes 1.33 or later; its node&#x27;s Kubernetes" in html


def test_pod_page_offers_the_in_place_resize_on_kubernetes_1_33_and_later(ops: Client, demo: Cluster) -> None:
    Node.objects.filter(cluster=demo).update(kubelet_version="v1.34.1")
    html = ops.get(f"{NS}pod/api-0/").content.decode()
    # api-0 is Burstable (250m request, 500m limit): raising the limit keeps it Burstable.
    patch = escape('{"spec":{"containers":[{"name":"main","resources":{"limits":{"cpu":"1200m"}}}]}}')
    assert (
        f"kubectl patch pod api-0 -n shop --subresource resize --patch {escape(chr(39))}{patch}{escape(chr(39))}"
        in html
    )
    assert html.count('class="copy"') == 3 and "No in-place resize" not in html


def test_pod_page_chart_draws_usage_against_floor_and_ceiling_and_ratio_against_target(
    ops: Client, demo: Cluster
) -> None:
    fig = chart(ops.get(f"{NS}pod/api-0/").content, "chart-1")
    traces = {t["name"]: t for t in fig["data"]}
    assert traces["shares floor 1,385m"]["y"] == [1385, 1385]
    assert traces["quota ceiling 500m"]["y"] == [500, 500]
    assert traces["target 10%"]["y"] == [10, 10]
    usage = [y for y in traces["usage"]["y"] if y is not None]
    assert len(usage) == 30 and all(abs(y - 490) < 1 for y in usage)  # 30 one-minute intervals at 490m
    ratios = [y for y in traces["throttle ratio"]["y"] if y is not None]
    assert all(abs(y - 60) < 0.1 for y in ratios)
    assert set(traces["threads"]["y"]) == {8}


def test_pod_page_chart_json_stays_small(ops: Client, demo: Cluster) -> None:
    html = ops.get(f"{NS}pod/api-0/").content.decode()
    payload = found(r'id="chart-1">(.*?)</script>', html)
    assert len(payload) < 12_000


def test_a_pod_without_a_limit_has_no_ceiling_line_and_no_kubectl_for_advice_without_numbers(
    ops: Client, demo: Cluster
) -> None:
    html = ops.get(f"{NS}pod/cache-0/").content.decode()
    names = {t["name"] for t in chart(html.encode(), "chart-1")["data"]}
    assert not any(name.startswith("quota ceiling") for name in names)
    assert "lower request" in html


def test_pod_page_chart_starts_at_the_first_sample_of_its_window(ops: Client, demo: Cluster) -> None:
    # The demo holds 30 minutes of samples: in the 1 h window they fill the axis, not its right half.
    html = ops.get(f"{NS}pod/api-0/").content
    fig = chart(html, "chart-1")
    usage = next(t for t in fig["data"] if t["name"] == "usage")
    assert fig["layout"]["xaxis"]["range"][0] == usage["x"][0]
    assert b'class="chart-note"' not in html  # 30 points draw lines: nothing to explain


def test_a_pod_without_a_limit_has_no_throttle_ratio_panel(ops: Client, demo: Cluster) -> None:
    html = ops.get("/c/demo/ns/batch/pod/batch-0/").content.decode()
    fig = chart(html.encode(), "chart-1")
    assert {t["name"] for t in fig["data"]} == {"usage", "shares floor 10m", "threads"}
    assert "yaxis2" not in fig["layout"]
    assert 'aria-label="Usage against floor and ceiling and threads of main"' in html


def test_a_pod_with_one_hourly_point_says_so(ops: Client, db: None) -> None:
    build_cluster("fresh", per_pattern=1, minutes=1)  # two readings a minute apart: one interval, one hour
    html = ops.get("/c/fresh/ns/shop/pod/api-0/?window=7d").content.decode()
    note = found(r'<p class="chart-note">(.*?)</p>', html)
    assert note.startswith("One hourly point so far (the hour from ")
    # A 7-day window ends on another day than it starts: both ends carry their date.
    assert re.search(r"window \d\d-\d\d \d\d:\d\d – \d\d-\d\d \d\d:\d\d UTC, charted hourly", html)
    usage = next(t for t in chart(html.encode(), "chart-1")["data"] if t["name"] == "usage (hourly mean)")
    assert usage["mode"] == "markers" and len(usage["x"]) == 1
    html = ops.get("/c/fresh/ns/shop/pod/api-0/?window=24h").content.decode()
    assert found(r'<p class="chart-note">(.*?)</p>', html).startswith("One sample interval so far")


def test_pod_page_on_the_7d_window_reads_hourly_points(ops: Client, demo: Cluster) -> None:
    html = ops.get(f"{NS}pod/api-0/?window=7d").content
    names = {t["name"] for t in chart(html, "chart-1")["data"]}
    assert "usage p95 per hour" in names


# --- node --------------------------------------------------------------------------------------------------------


def test_node_page_shows_the_kernel_verdict_with_reasons_and_fixes(ops: Client, demo: Cluster) -> None:
    html = ops.get("/c/demo/node/demo-node-0/").content.decode()
    assert "verdict-unknown" in html and "confidence low" in html
    assert "4.19.76" in html and "<code>4.19.84</code>" in html
    assert "python manage.py kernel_probe" in html  # no probe yet: how to run one


def test_node_page_shows_the_probe_result_when_there_is_one(ops: Client, demo: Cluster) -> None:
    node = Node.objects.get(name="demo-node-0")
    node.probe = {
        "kernel_release": "4.19.76-linuxkit",
        "cpus": 16,
        "fibtest_cpu_ms": 3100.0,
        "fibtest_expected_cpu_ms": 5000.0,
        "fibtest_cpu_ratio": 0.62,
        "verdict": "shows slice-expiry throttling",
        "reason": "fibtest got 3100 of 5000 ms (62%)",
    }
    node.probe_at = timezone.now()
    node.save()
    html = ops.get("/c/demo/node/demo-node-0/").content.decode()
    assert "shows slice-expiry throttling" in html and "fibtest got 3100 of 5000 ms" in html
    assert "62%" in html and "3,100.0 ms" in html
    assert "python manage.py kernel_probe" not in html


def test_node_page_charts_who_holds_the_shares(ops: Client, demo: Cluster) -> None:
    html = ops.get("/c/demo/node/demo-node-0/").content
    bars = chart(html, "shares-chart")["data"][0]
    # Largest first: cache 2048 of 2,920 shares = 70.1%, web 512 = 17.5%, api 256 = 8.8%, worker 102 = 3.5%, batch 2.
    assert bars["y"] == ["shop/cache-0", "shop/web-0", "shop/api-0", "shop/worker-0", "batch/batch-0"]
    assert bars["x"] == [2000, 500, 250, 100, 0]
    assert bars["text"] == ["70.1%", "17.5%", "8.8%", "3.5%", "0.1%"]


def test_node_page_lists_its_throttled_containers(ops: Client, demo: Cluster) -> None:
    html = ops.get("/c/demo/node/demo-node-1/").content.decode()
    table = html[html.index('id="throttled"') :]
    assert "shop/api-1" in table and "shop/worker-1" in table
    assert "api-0" not in table and "web-1" not in table


def test_the_404_page_names_what_was_not_found(ops: Client, demo: Cluster, settings) -> None:
    settings.DEBUG = False  # the site's own 404 page, as in production
    response = ops.get("/c/demo/ns/shop/pod/nowhere/")
    assert response.status_code == 404
    html = response.content.decode().replace("&#x27;", "'")
    assert "No pod shop/nowhere in cluster 'demo'." in html and "Back to the overview" in html


def test_a_cluster_with_data_but_no_collection_run_shows_when_data_last_came(ops: Client, demo: Cluster) -> None:
    html = ops.get("/").content.decode()  # the builder stores readings directly, as an import or an agent would
    row = html[html.index('href="/c/demo/"') :].split("</tr>")[0]
    assert "data from" in row and "no collection run on record" in row and "no data yet" not in row


# --- a new install: young windows, lifetime figures, data too short to judge -------------------------------------


@pytest.fixture()
def young(db: None) -> Cluster:
    """A cluster 5 minutes old whose 7 d window has not been refreshed yet; its last collection ran 20 s ago."""
    cluster = build_cluster("young", minutes=5)
    Finding.objects.filter(cluster=cluster, window="7d").delete()
    CollectionRun.objects.create(
        cluster=cluster, source="kubernetes", started_at=timezone.now() - timedelta(seconds=20), status="ok"
    )
    return cluster


@pytest.fixture()
def once(db: None) -> Cluster:
    """One reading of containers that ran 3 s before it: lifetime figures over 30 periods each."""
    return build_cluster("once", minutes=0, uptime_s=3)


def coverage_line(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found(r'(<p class="coverage[^"]*".*?</p>)', html))).strip()


def test_a_young_24h_window_says_how_much_it_covers_and_names_both_dates(ops: Client, young: Cluster) -> None:
    html = ops.get("/c/young/ns/shop/?window=24h").content.decode()
    line = coverage_line(html)
    assert "from 5 min of 24 h of data — the 24h window is not full yet; next refresh at" in line
    tile = found(r'id="window-span"><span class="tile-n tile-text">([^<]+)<', html)
    start, end = tile.split(" – ")  # "11-30 18:50 – 12-01 18:50", not "11-30 18:50–18:50"
    assert start[:5] != end[:5] and start[6:] == end[6:]
    assert "over the 10% target in 5 min of 24 h so far" in html


def test_a_window_not_computed_yet_says_when_it_will_be_instead_of_zero(ops: Client, young: Cluster) -> None:
    html = ops.get("/c/young/ns/shop/?window=7d").content.decode()
    next_at = timezone.localtime(CollectionRun.objects.get(cluster=young).started_at, UTC) + timedelta(seconds=60)
    assert coverage_line(html) == (f"Figures not computed yet for the 7d window — next refresh at {next_at:%H:%M} UTC.")
    assert "over the 10% target" not in html  # no "0 over the target" tile when nothing was measured
    assert "its pods have not been collected" not in html
    cluster_html = ops.get("/c/young/?window=7d").content.decode()
    assert "Figures not computed yet for the 7d window" in coverage_line(cluster_html)


def test_namespaces_without_measured_figures_show_a_dash_over_target(ops: Client, young: Cluster) -> None:
    Finding.objects.filter(cluster=young, namespace="batch").update(throttle_ratio=None, usage_avg_mcpu=None)
    html = ops.get("/c/young/").content.decode()
    batch = html[html.index('href="/c/young/ns/batch/') :].split("</tr>")[0]
    assert '<span title="not computed yet">—</span>' in batch
    shop = html[html.index('href="/c/young/ns/shop/') :].split("</tr>")[0]
    assert "crit-text" in shop and "lifetime" not in shop


def test_every_page_with_window_figures_says_what_they_cover(ops: Client, young: Cluster) -> None:
    for url in ("/c/young/", "/c/young/ns/shop/", "/c/young/ns/shop/pod/api-0/", "/c/young/node/young-node-0/"):
        line = coverage_line(ops.get(url).content.decode())
        assert "from 5 of 60 min of data — the 1h window is not full yet" in line, url
    row = ops.get("/").content.decode().split('data-cluster="young"')[1].split("</td>")[0]
    assert "5 of 60 min" in row and "so far" in row


def test_lifetime_figures_are_labelled_on_every_page(ops: Client, once: Cluster) -> None:
    overview = ops.get("/").content.decode()
    table = overview[overview.index('id="workloads"') :]
    api = next(row for row in table.split("</tr>") if ">api</a>" in row and 'href="/c/once/"' in row)
    assert "60%" in api and ">lifetime</span>" in api and "of 30 periods since start" in api
    assert "lifetime only" in overview.split('data-cluster="once"')[1].split("</td>")[0]
    cluster = ops.get("/c/once/").content.decode()
    assert "Lifetime figures only" in coverage_line(cluster)
    shop = cluster[cluster.index('href="/c/once/ns/shop/') :].split("</tr>")[0]
    assert ">lifetime</span>" in shop
    report = ops.get("/c/once/ns/shop/").content.decode()
    assert "Lifetime figures only" in coverage_line(report)
    assert "since each container started (UTC)" in report and "worst throttle ratio <span" in report
    node = ops.get("/c/once/node/once-node-0/").content.decode()
    throttled = node[node.index('id="throttled"') :]
    assert "shop/api-0" in throttled and ">lifetime</span>" in throttled.split("</tr>")[1]


def test_a_window_with_some_lifetime_rows_counts_them(ops: Client, young: Cluster) -> None:
    Finding.objects.filter(cluster=young, window="1h", container__pod__name="api-0").update(
        lifetime=True, window_start=None
    )
    assert "1 container seen once has lifetime figures" in coverage_line(ops.get("/c/young/ns/shop/").content.decode())


def test_rules_short_of_data_say_so_instead_of_nothing_to_change(ops: Client, young: Cluster) -> None:
    # cache: 2000m request, 30m used; 5 minutes of samples, lower_request needs half the hour and 20 samples.
    report = ops.get("/c/young/ns/shop/").content.decode()
    advice = found(r'data-pod="cache-0".*?<td class="advice">(.*?)</td>', report)
    assert ">not enough data yet (5 of 30 minutes)</span>" in advice
    web = found(r'data-pod="web-0".*?<td class="advice">(.*?)</td>', report)
    assert ">none</span>" in web  # judged by every rule: its usage rules lower_request out, 3,000 periods
    pod = ops.get("/c/young/ns/shop/pod/cache-0/").content.decode()
    assert "Not enough data yet (5 of 30 minutes): some rules cannot judge this container until then" in pod
    assert "Nothing to change" not in pod
    assert "No change suggested yet, but not every rule could judge this window" in pod
    assert "Nothing to change: no threshold is crossed" in ops.get("/c/young/ns/shop/pod/web-0/").content.decode()


def test_the_pod_page_gives_each_reason_once(ops: Client, demo: Cluster) -> None:
    html = ops.get(f"{NS}pod/api-0/").content.decode()
    finding = Finding.objects.get(cluster=demo, window="1h", container__pod__name="api-0")
    for rec in finding.recommendations:
        assert html.count(escape(rec["detail"])) == 1, rec["kind"]
    assert "Evidence and reasoning" not in html


def test_no_quota_ratio_means_no_throttled_seconds_either(ops: Client, demo: Cluster) -> None:
    # A source that reports 0 throttled seconds for a container without a quota: still "—" beside the "—" ratio.
    Finding.objects.filter(cluster=demo, container__pod__name="cache-0").update(throttled_seconds_per_second=0.0)
    html = ops.get(f"{NS}?workload=cache").content.decode()
    row = html[html.index('data-pod="cache-0"') :].split("</tr>")[0]
    cells = re.findall(r'<td class="num[^"]*"[^>]*>([^<]*)', row)
    assert cells[6:8] == ["—", "—"]  # throttle ratio, throttled s/s
    pod = ops.get(f"{NS}pod/cache-0/").content.decode()
    assert "<dt>Throttled</dt><dd>—</dd>" in pod and "0.00" not in pod


def test_usage_above_the_limit_is_explained_as_sampling_jitter(ops: Client, demo: Cluster) -> None:
    Finding.objects.filter(cluster=demo, window="1h", container__pod__name="api-0").update(usage_p95_mcpu=501.2)
    report = ops.get(NS).content.decode()
    assert report.count('<span class="above-limit" title="Above the 500m limit by sampling jitter') == 1
    assert "usage p95 above the limit: sampling jitter" in report
    pod = ops.get(f"{NS}pod/api-0/").content.decode()
    assert "The p95 of 501m reads above the 500m limit by sampling jitter" in pod
    assert "sampling jitter" not in ops.get(f"{NS}pod/api-1/").content.decode()


def test_the_ratio_filter_takes_percent_and_still_reads_old_ratio_links(ops: Client, demo: Cluster) -> None:
    assert set(report_pods(ops.get(f"{NS}?min_throttle_pct=50").content)) == {"api-0", "api-1"}
    assert set(report_pods(ops.get(f"{NS}?min_throttle_pct=40").content)) == {"api-0", "api-1", "worker-0", "worker-1"}
    old = ops.get(f"{NS}?min_throttle_ratio=0.5").content.decode()
    assert set(report_pods(old.encode())) == {"api-0", "api-1"}
    assert 'name="min_throttle_pct" step="any" min="0" max="100" placeholder="e.g. 10" value="50"' in old
    bad = ops.get(f"{NS}?min_throttle_pct=150")
    assert bad.status_code == 400 and "between 0 and 100 percent" in bad.content.decode()
    rows = csv_rows(ops.get(f"{NS}recommendations.csv?kind=cut_threads&min_throttle_pct=50"))
    assert {r["pod"] for r in rows} == {"api-0", "api-1"}  # the page's Download CSV link carries the percent


def test_counts_of_one_read_in_the_singular(ops: Client, db: None) -> None:
    build_cluster("one", per_pattern=1, minutes=3, kernel="5.10.12")  # 2 nodes on a fixed kernel
    Node.objects.filter(name="one-node-1").update(kernel_version="4.14.100")
    html = ops.get("/").content.decode()
    assert "nodes on a fixed kernel" not in html and "node on a fixed kernel" in html
    assert "<p>5 pods request 2,850m of" in ops.get("/c/one/node/one-node-0/").content.decode()  # one of each pattern
    Container.objects.filter(pod__node__name="one-node-0").exclude(pod__name="api-0").delete()
    assert "<p>1 pod requests 250m of" in ops.get("/c/one/node/one-node-0/").content.decode()


def test_pages_carry_no_internal_references(ops: Client, demo: Cluster) -> None:
    for url in (
        "/",
        "/c/demo/",
        NS,
        f"{NS}pod/api-0/",
        f"{NS}pod/worker-0/",
        f"{NS}pod/cache-0/",
        "/c/demo/node/demo-node-0/",
    ):
        html = ops.get(url).content.decode()
        assert not re.search(r"seed \d|DOMAIN|DESIGN\.md|§", html), url


def test_pod_page_shows_the_applied_and_the_asked_resources_of_a_resize_under_way(ops: Client, db: None) -> None:
    """The real pod list of a pod being resized in place: the spec asks 500m, the status says 200m is applied."""
    import json as json_module
    from pathlib import Path

    from apps.collector.inventory import pods_from_objects
    from apps.telemetry.ingest import ingest
    from apps.telemetry.readings import Batch, NodeInfo

    fixture = Path(__file__).parent.parent / "fixtures" / "kubelet" / "pods-in-place-resize.json"
    [pod], _ = pods_from_objects(json_module.loads(fixture.read_text())["items"])
    cluster = Cluster.objects.create(name="resizing")
    pending = dataclasses.replace(pod, resize_status="Pending (Deferred)", resize_message="waiting for room")
    ingest(cluster, Batch(nodes=[NodeInfo(name=pod.node or "n1", kubelet_version="v1.34.1")], pods=[pending]))

    html = ops.get(f"/c/resizing/ns/{pod.namespace}/pod/{pod.name}/").content.decode()

    assert "Applied now: request 200m, limit 200m; the spec asks request 500m, limit 500m" in html
    assert "In-place resize: <strong>Pending (Deferred)</strong> — waiting for room." in html
