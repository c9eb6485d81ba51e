"""The dashboard in a real browser (Debian's Chromium via Playwright) against a live server.

A user logs in through the form, walks overview → cluster → namespace → pod, sorts and filters the report,
downloads the CSV and sees the Plotly chart drawn. Screenshots at laptop and phone sizes go to
artifacts/screenshots/ (kept by CI). Each test is bounded: every wait times out within seconds.
"""

from __future__ import annotations

import base64
import csv
import io
import itertools
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.builders import PATTERNS, Pattern, build_cluster

from .conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"  # Debian's package; Playwright's own browser downloads are not used
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 10_000


@pytest.fixture()
def site(live_server, django_user_model) -> str:
    django_user_model.objects.create_user("ops", password=PASSWORD)
    build_cluster("demo")
    return live_server.url


def chromium() -> Iterator:
    """Debian's Chromium through Playwright, closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture()
def browser(site: str) -> Iterator:
    """Started after the data is stored: while Playwright's sync API runs, this thread must not touch the database."""
    yield from chromium()


def logged_in_page(browser, site: str, viewport: dict) -> tuple[Any, list[str]]:
    """A page logged in through the form, and the list its JavaScript errors are collected in."""
    context = browser.new_context(viewport=viewport, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{site}/c/demo/")  # not logged in: the login form, which brings us back here
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "ops")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{site}/c/demo/")
    return page, errors


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def shoot_chart(page, name: str) -> None:
    """The page, and its first chart at full size (a page shot is scaled down to read)."""
    shoot(page, name)
    page.locator(".js-plotly-plot").first.screenshot(path=str(SHOTS / f"{name}-chart.png"))


def report_pods(page) -> list[str]:
    return page.locator("#report tbody tr").evaluate_all("rows => rows.map(r => r.dataset.pod)")


def test_a_user_walks_from_the_overview_to_a_pod_chart(browser, site: str) -> None:
    page, errors = logged_in_page(browser, site, LAPTOP)
    page.goto(f"{site}/")
    shoot(page, "overview-laptop")
    page.click("#clusters a[href='/c/demo/']")
    page.wait_for_url(f"{site}/c/demo/")
    assert page.locator("#nodes tbody tr").count() == 2
    shoot(page, "cluster-laptop")

    page.click("#namespaces a[href^='/c/demo/ns/shop/']")
    page.wait_for_selector("#report")
    assert len(report_pods(page)) == 8
    assert page.locator("#report tbody tr").first.locator("td.ratio").inner_text().startswith("60%")
    shoot(page, "namespace-laptop")

    page.click("#report a[href^='/c/demo/ns/shop/pod/api-0/']")
    page.wait_for_selector(".js-plotly-plot .main-svg")
    assert page.locator(".js-plotly-plot").count() == 2  # the container's figures and its limit curve
    legend = page.locator(".js-plotly-plot .legend").first.text_content() or ""
    assert "shares floor 1,385m" in legend and "quota ceiling 500m" in legend and "target 10%" in legend
    assert "kubectl set resources deployment/api -c main --limits=cpu=1200m -n shop" in page.content()
    shoot(page, "pod-laptop")
    assert errors == []


def test_the_report_sorts_filters_and_downloads_its_csv(browser, site: str) -> None:
    page, errors = logged_in_page(browser, site, LAPTOP)
    page.goto(f"{site}/c/demo/ns/shop/")

    page.click("#report th a:text('Pod')")
    page.wait_for_url("**sort=pod")
    assert report_pods(page)[:2] == ["api-0", "api-1"]
    page.click("#report th a:text('Pod')")
    page.wait_for_url("**sort=-pod")
    assert report_pods(page)[0] == "worker-1"

    page.select_option("select[name=kind]", "cut_threads")
    page.fill("input[name=min_throttle_pct]", "50")  # percent, as the ratio column reads
    page.click("#filters button[type=submit]")
    page.wait_for_url("**min_throttle_pct=50**")
    assert report_pods(page) == ["api-1", "api-0"]  # the sort survives filtering

    with page.expect_download() as download_info:
        page.click("#download-csv")
    download = download_info.value
    assert download.suggested_filename == "cputune-demo-shop-1h-recommendations.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text())))
    assert {(r["pod"], r["kind"]) for r in rows} == {("api-0", "cut_threads"), ("api-1", "cut_threads")}
    assert errors == []


def test_pages_read_on_a_phone(browser, site: str) -> None:
    page, errors = logged_in_page(browser, site, PHONE)
    for name, path in (
        ("overview", "/"),
        ("cluster", "/c/demo/"),
        ("namespace", "/c/demo/ns/shop/"),
        ("node", "/c/demo/node/demo-node-0/"),
        ("pod", "/c/demo/ns/shop/pod/worker-0/"),
        ("pod-no-limit", "/c/demo/ns/batch/pod/batch-0/"),
    ):
        page.goto(f"{site}{path}")
        if page.locator("[data-chart]").count():
            page.wait_for_selector(".js-plotly-plot .main-svg")
        # Nothing but the report's own scroll box may be wider than the screen.
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px on a phone"
        shoot(page, f"{name}-phone")
    # The report scrolls sideways inside its box, with the pod column kept in view.
    page.goto(f"{site}/c/demo/ns/shop/")
    wrap = page.locator(".table-wrap.tall")
    assert wrap.evaluate("el => el.scrollWidth > el.clientWidth")
    wrap.evaluate("el => { el.scrollLeft = 400; }")
    first_cell = page.locator("#report tbody tr td.sticky-col").first.bounding_box()
    assert first_cell is not None and first_cell["x"] < 20
    assert errors == []


@pytest.fixture()
def chart_cases(site: str) -> str:
    """Two more clusters, stored before the browser starts: `edge`, whose `pinned-0` uses exactly its 500m limit,
    and `fresh`, collected twice a minute apart (one sample interval, so one hourly point)."""
    pinned = Pattern("pinned", "shop", 500, 500, 500.0, 0.8, 4)
    build_cluster("edge", per_pattern=1, patterns=(pinned, PATTERNS[2]))  # a cache neighbour brings the floor down
    build_cluster("fresh", per_pattern=1, minutes=1, patterns=PATTERNS[:1])
    return site


# The drawn chart's panels, legend, axis start and first usage x, read from plotly.js's own layout.
_CHART_FACTS = r"""el => ({
    panels: Object.keys(el._fullLayout).filter(k => /^yaxis\d*$/.test(k)).length,
    legend: el.querySelector(".legend").textContent,
    titles: Array.from(el.querySelectorAll(".annotation-text")).map(a => a.textContent),
    x_start_ms: el._fullLayout.xaxis.r2l(el._fullLayout.xaxis.range[0]),
    first_usage_ms: el.data.find(t => t.name.startsWith("usage")).x[0],
    markers: el.querySelectorAll(".scatterlayer .trace .points path").length,
})"""

# Colours along the pixel row where y = 500m in the usage panel, from a screenshot of the chart element.
_ROW_COLOURS = """async ([png, y_value]) => {
    const el = document.querySelector(".js-plotly-plot");
    const xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
    const row = Math.round(ya._offset + ya.l2p(y_value));
    const img = new Image();
    img.src = "data:image/png;base64," + png;
    await img.decode();
    const canvas = document.createElement("canvas");
    canvas.width = img.width;
    canvas.height = img.height;
    const ctx = canvas.getContext("2d");
    ctx.drawImage(img, 0, 0);
    const left = Math.round(xa._offset + 20), width = Math.round(xa._length - 40);
    const px = ctx.getImageData(left, row, width, 1).data;
    const out = [];
    for (let i = 0; i < px.length; i += 4) out.push([px[i], px[i + 1], px[i + 2]]);
    return out;
}"""


def chart_facts(page) -> dict[str, Any]:
    page.wait_for_selector(".js-plotly-plot .main-svg")
    return page.locator(".js-plotly-plot").first.evaluate(_CHART_FACTS)


def test_pod_charts_fit_each_container(chart_cases, browser, site: str) -> None:
    """Throttled with a limit, without a limit, pinned at its limit, and a lone point: each chart as a user sees it."""
    page, errors = logged_in_page(browser, site, LAPTOP)

    page.goto(f"{site}/c/demo/ns/shop/pod/api-0/")
    facts = chart_facts(page)
    assert facts["panels"] == 3 and "Throttle ratio (% of periods)" in facts["titles"]
    assert "quota ceiling 500m" in facts["legend"] and "target 10%" in facts["legend"]
    assert facts["x_start_ms"] == facts["first_usage_ms"]  # 30 minutes of a 1 h window fill the width
    shoot_chart(page, "pod-chart-throttled-laptop")

    page.goto(f"{site}/c/demo/ns/batch/pod/batch-0/")
    facts = chart_facts(page)
    assert facts["panels"] == 2 and "Throttle ratio (% of periods)" not in facts["titles"]
    assert "throttle ratio" not in facts["legend"] and "target" not in facts["legend"]
    shoot_chart(page, "pod-chart-no-limit-laptop")

    page.goto(f"{site}/c/edge/ns/shop/pod/pinned-0/")
    chart_facts(page)
    png = base64.b64encode(page.locator(".js-plotly-plot").first.screenshot()).decode()
    row = page.evaluate(_ROW_COLOURS, [png, 500])
    usage_blue = [(r, g, b) for r, g, b in row if b > r + 60]  # #2356c7 and its antialiased edges
    ceiling_red = [(r, g, b) for r, g, b in row if r > b + 60]  # #b3261e
    assert len(usage_blue) == len(row) and not ceiling_red, "the ceiling's dashes cover the usage line"
    shoot_chart(page, "pod-chart-at-limit-laptop")

    for window, note in (("7d", "One hourly point so far"), ("24h", "One sample interval so far")):
        page.goto(f"{site}/c/fresh/ns/shop/pod/api-0/?window={window}")
        facts = chart_facts(page)
        assert note in page.inner_text(".chart-note")
        assert facts["markers"] >= 3  # usage, throttle ratio and threads each show their point
        shoot_chart(page, f"pod-chart-one-point-{window}-laptop")
    assert errors == []


_CURVE_FACTS = """el => {
    const data = el._fullData || [];
    const line = data.find(t => t.name.startsWith("expected throttle ratio"));
    const mark = prefix => { const t = data.find(t => t.name.startsWith(prefix)); return t ? [t.x[0], t.y[0]] : null; };
    return {line: line ? [Array.from(line.x), Array.from(line.y)] : null, now: mark("now:"),
            suggested: mark("suggested:"), target: (data.find(t => t.name.startsWith("target")) || {y: [null]}).y[0],
            texts: Array.from(el.querySelectorAll(".textpoint text")).map(t => t.textContent)};
}"""


def test_the_pod_page_draws_what_a_higher_limit_should_do(browser, site: str) -> None:
    """The limit curve: the current limit at its measured ratio, the plan's limit at the ratio its card states,
    each higher limit no worse than a lower one, and the suggestion under the target."""
    page, errors = logged_in_page(browser, site, LAPTOP)
    page.goto(f"{site}/c/demo/ns/shop/pod/api-0/")
    curve = page.locator(".limit-curve .js-plotly-plot")
    curve.locator(".main-svg").first.wait_for()
    facts = curve.evaluate(_CURVE_FACTS)
    card = page.locator("article.rec", has_text="raise limit").first
    stated = card.locator(".expected strong").inner_text()
    limits, ratios = facts["line"]
    assert facts["now"] == [500, pytest.approx(0.6, abs=0.01)] and limits[0] == 500
    assert facts["suggested"][0] == 1200 and f"{facts['suggested'][1]:.1%}".replace(".0%", "%") in (stated, stated)
    assert facts["suggested"][1] <= facts["target"] == 0.1
    assert all(later <= earlier for earlier, later in itertools.pairwise(ratios))
    assert {"now: 500m", "suggested: 1,200m"} <= set(facts["texts"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".limit-curve").screenshot(path=str(SHOTS / "pod-limit-curve-laptop.png"))
    shoot(page, "pod-with-limit-curve-laptop")
    assert errors == []


PSI_PATTERNS = (
    Pattern("hot", "shop", 250, 500, 490.0, 0.6, 8, pressure=0.3),  # throttled and waiting
    Pattern("dark", "shop", 250, 500, 490.0, 0.6, 8, pressure=0.0),  # throttled, PSI reads 0: not measured
    Pattern("old", "shop", 250, 500, 490.0, 0.6, 8),  # no pressure series
)


@pytest.fixture()
def psi_site(live_server, django_user_model) -> str:
    django_user_model.objects.create_user("ops", password=PASSWORD)
    build_cluster("demo", patterns=PSI_PATTERNS, per_pattern=1)
    # And the real Kubernetes 1.34 capture, whose pod cgroups carry their own quota.
    capture = Path(__file__).resolve().parents[1] / "fixtures" / "clusters" / "k8s-1.34-minikube-psi"
    call_command(
        "import_dump", "--cluster", "mk", "--nodes", str(capture / "nodes.yaml"), "--pods", str(capture / "pods.yaml"),
        "--metrics", f"datagen-1-34={capture / 'cadvisor.txt'}", stdout=io.StringIO(),
    )  # fmt: skip
    return live_server.url


@pytest.fixture()
def psi_browser(psi_site: str) -> Iterator:
    yield from chromium()


_TRACES = "el => el.data.map(t => [t.name, Array.from(t.y || []).filter(v => v !== null)])"


def test_the_report_and_the_pod_chart_show_cpu_pressure_and_never_an_unmeasured_zero(psi_browser, psi_site):
    page, errors = logged_in_page(psi_browser, psi_site, LAPTOP)
    page.goto(f"{psi_site}/c/demo/ns/shop/")
    page.wait_for_selector("#report")
    assert page.locator("#report th", has_text="CPU waiting").count() == 1
    cells = {pod: page.locator(f"#report tbody tr[data-pod='{pod}'] td.pressure").inner_text() for pod in
             ("hot-0", "dark-0", "old-0")}  # fmt: skip
    assert cells == {"hot-0": "30.0%", "dark-0": "not measured", "old-0": "—"}
    shoot(page, "namespace-pressure-laptop")

    charts = {}
    for pod in ("hot-0", "dark-0"):
        page.goto(f"{psi_site}/c/demo/ns/shop/pod/{pod}/")
        chart = page.locator(".js-plotly-plot").first
        chart.locator(".main-svg").first.wait_for()
        charts[pod] = dict(chart.evaluate(_TRACES))
        if pod == "hot-0":
            shoot_chart(page, "pod-pressure-laptop")
    waiting = charts["hot-0"]["CPU pressure (% of time waiting)"]
    assert waiting and all(v == pytest.approx(30.0) for v in waiting)
    assert "CPU pressure (% of time waiting)" not in charts["dark-0"]  # a zero that was not measured is not drawn
    assert "pressure is not being measured on this node" in page.content()
    assert errors == []


def test_the_pod_page_says_when_the_pods_own_quota_throttles_it(psi_browser, psi_site):
    page, errors = logged_in_page(psi_browser, psi_site, LAPTOP)
    page.goto(f"{psi_site}/c/mk/ns/scraper/pod/e2e-container-creating/")
    box = page.locator("#pod-quota")
    box.wait_for()
    text = box.inner_text()
    assert "throttled in 73% of its periods since the pod started (43 of 59)" in text
    assert "none of its containers reported throttling" in text
    assert "pod-quota-alone" in (box.get_attribute("class") or "")
    assert box.evaluate("el => getComputedStyle(el).borderLeftStyle") == "solid"  # the stylesheet marks it
    # The plan's first step is the pod's quota, with the pod's value, not the container's.
    first = page.locator("article.rec").first
    assert first.locator(".rec-kind").inner_text() == "raise pod limit"
    assert "pod limit" in first.locator(".suggested").inner_text()
    shoot(page, "pod-quota-laptop")

    page.goto(f"{psi_site}/c/mk/ns/scraper/")
    row = page.locator("#report tbody tr[data-pod='e2e-container-creating']")
    row.wait_for()
    assert row.locator("td.ratio .pod-ratio").inner_text() == "pod 73%"  # 43 of 59 periods
    assert row.locator("td.advice").inner_text().startswith("raise pod limit")
    shoot(page, "namespace-pod-quota-laptop")
    assert errors == []


@pytest.fixture()
def bot_key(site: str) -> str:
    """A read token a chat bot would hold; made before the browser starts (it touches the database)."""
    from django.contrib.auth import get_user_model

    from apps.api.services import create_token

    _, key = create_token(get_user_model().objects.get(username="ops"), "read", name="chatops bot")
    return key


def test_a_person_finds_the_worst_pod_exports_it_and_a_bot_fetches_the_same(bot_key, browser, site: str) -> None:
    page, errors = logged_in_page(browser, site, LAPTOP)
    page.goto(f"{site}/c/demo/ns/shop/")
    # The report is ordered worst first: the top row is the most throttled pod, and its page says why.
    worst = report_pods(page)[0]
    page.click(f"#report a[href^='/c/demo/ns/shop/pod/{worst}/']")
    page.wait_for_selector(".js-plotly-plot .main-svg")
    text = page.inner_text("main")
    assert "throttle ratio of 60%" in text and "plateau at about 100 ms and 200 ms" in text
    page.goto(f"{site}/c/demo/ns/shop/")
    with page.expect_download() as download_info:
        page.click("#download-csv")
    exported = Path(download_info.value.path()).read_text()
    assert errors == []

    api = f"{site}/api/v1/recommendations/?cluster=demo&namespace=shop&format=csv"
    request = urllib.request.Request(api, headers={"Authorization": f"Token {bot_key}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        fetched = response.read().decode()
    assert list(csv.reader(io.StringIO(fetched))) == list(csv.reader(io.StringIO(exported)))
    rows = list(csv.DictReader(io.StringIO(fetched)))
    assert rows[0]["pod"] == worst and rows[0]["throttle_ratio"] == "0.6"

    summary = f"{site}/api/v1/clusters/demo/namespaces/shop/summary/?format=text"
    request = urllib.request.Request(summary, headers={"Authorization": f"Token {bot_key}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        message = response.read().decode()
    assert worst in message and f"{site}/c/demo/ns/shop/" in message


def test_the_api_docs_draw_their_operations_with_no_host_but_this_one_reachable(browser, site: str) -> None:
    """Swagger UI comes from this site (the sidecar's files), not a CDN: with every other host refused, as on a
    machine without internet, /api/docs/ still lists the API's operations."""
    context = browser.new_context(viewport=LAPTOP)
    context.set_default_timeout(TIMEOUT_MS)
    outside: list[str] = []

    def only_this_site(route) -> None:
        if route.request.url.startswith(site):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_site)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{site}/api/docs/")
    page.wait_for_selector(".opblock-summary-path")
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/v1/kernel-check/" in paths and any(p.endswith("/summary/") for p in paths)
    shoot(page, "api-docs-laptop")
    assert outside == [] and errors == []


@pytest.fixture()
def early_site(live_server, django_user_model) -> str:
    """A fresh install a few minutes in: `demo` has 5 minutes of readings (its 24 h window holds 5 minutes, its 7 d
    window is not refreshed yet) and `once` a single reading of containers already running (lifetime figures only)."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.advisor.models import Finding
    from apps.collector.models import CollectionRun

    django_user_model.objects.create_user("ops", password=PASSWORD)
    demo = build_cluster("demo", minutes=5)
    Finding.objects.filter(cluster=demo, window="7d").delete()
    CollectionRun.objects.create(
        cluster=demo, source="kubernetes", started_at=timezone.now() - timedelta(seconds=20), status="ok"
    )
    build_cluster("once", minutes=0, uptime_s=3)  # one reading of containers 3 s old: 30 periods each
    return live_server.url


@pytest.fixture()
def early_browser(early_site: str) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def test_a_new_install_says_what_its_figures_rest_on(early_browser, early_site: str) -> None:
    site = early_site
    page, errors = logged_in_page(early_browser, site, LAPTOP)
    page.goto(f"{site}/")
    states = dict(
        zip(
            page.locator("#clusters td.figures-state").evaluate_all("cells => cells.map(c => c.dataset.cluster)"),
            page.locator("#clusters td.figures-state").all_inner_texts(),
            strict=True,
        )
    )
    assert states["demo"].startswith("5 of 60 min so far") and states["once"].startswith("lifetime only")
    # once's api-0 was throttled in 60% of its periods since it started: labelled lifetime, not "last hour".
    once_rows = page.locator("#workloads tbody tr", has=page.locator("a[href='/c/once/']"))
    assert once_rows.count() == 2 and all("lifetime" in t for t in once_rows.all_inner_texts())
    assert "2 nodes on an affected kernel" not in page.inner_text("main")  # demo and once: unknown kernels
    shoot(page, "early-overview-laptop")

    page.goto(f"{site}/c/demo/ns/shop/?window=24h")
    coverage = page.inner_text("p.coverage")
    assert "from 5 min of 24 h of data — the 24h window is not full yet" in coverage
    assert "next refresh at" in coverage
    assert "over the 10% target in 5 min of 24 h so far" in page.inner_text("#over-target")
    start, end = page.inner_text("#window-span .tile-n").split(" – ")
    assert start[:5] != end[:5], "a 24 h window names both dates"  # "11-30 18:50–12-01 18:50"
    shoot(page, "early-namespace-24h-laptop")

    page.goto(f"{site}/c/demo/ns/shop/?window=7d")
    assert "Figures not computed yet for the 7d window — next refresh at" in page.inner_text("main")
    shoot(page, "early-namespace-7d-laptop")

    page.goto(f"{site}/c/demo/ns/shop/")
    cache = page.locator("#report tr[data-pod='cache-0'] td.advice").inner_text()
    assert cache == "not enough data yet (5 of 30 minutes)"
    page.goto(f"{site}/c/demo/ns/shop/pod/cache-0/")
    text = page.inner_text("main")
    assert "Not enough data yet (5 of 30 minutes): some rules cannot judge this container until then" in text
    assert "Nothing to change" not in text
    shoot(page, "early-pod-laptop")

    page.goto(f"{site}/c/once/ns/shop/")
    assert "Lifetime figures only" in page.inner_text("p.coverage")
    assert page.locator("#report .badge.lifetime").count() == 6  # api, worker, web × 2: the ones with CFS counters
    shoot(page, "once-namespace-laptop")
    page.goto(f"{site}/c/once/ns/shop/pod/api-0/")
    shoot(page, "once-pod-laptop")
    page.goto(f"{site}/c/once/")
    assert page.locator("#namespaces .badge.lifetime").count() == 1  # shop's worst ratio; batch has none
    shoot(page, "once-cluster-laptop")
    page.goto(f"{site}/c/demo/node/demo-node-0/?window=7d")
    assert "not computed yet" in page.inner_text("main")
    shoot(page, "early-node-laptop")
    page.set_viewport_size(PHONE)
    page.goto(f"{site}/c/demo/ns/shop/?window=24h")
    shoot(page, "early-namespace-24h-phone")
    assert errors == []


@pytest.fixture()
def lab_site(site: str, settings, tmp_path) -> str:
    from apps.clusters.models import Cluster, SourceKind
    from apps.verify import results
    from apps.verify.contention import Contention

    from .test_lab_verify_page import PADDED, RAISED, ROWS

    settings.DATA_DIR = tmp_path
    Cluster.objects.create(name="lab", source=SourceKind.LAB)
    results.save_outcomes([RAISED, PADDED], 0.1)
    results.save_contention(Contention(ROWS, 2, 2000, 2, 5.0, 1985.0, 1990.0))
    return site


def test_the_lab_verify_page_is_reached_from_the_lab_cluster(lab_site: str, browser) -> None:
    page, errors = logged_in_page(browser, lab_site, LAPTOP)
    page.goto(f"{lab_site}/c/lab/")
    page.click("#lab-verify-link")
    page.wait_for_url(f"{lab_site}/c/lab/lab-verify/")
    assert page.locator("#outcomes tbody tr").count() == 2
    assert page.locator("#contention tbody tr").count() == 3
    assert page.locator("#goals li.crit-text").count() == 3  # padded, floor and proportional missed
    shoot(page, "lab-verify-laptop")
    assert errors == []


@pytest.fixture()
def resize_site(live_server, django_user_model) -> str:
    """The real in-place-resize pod list (Guaranteed; applied 200m/200m while the spec asks 500m/500m) on a 1.34
    kubelet, and a Burstable copy of it, both running at their 200m ceiling and throttled in 60 % of periods."""
    import dataclasses
    import json
    from datetime import timedelta

    from django.utils import timezone

    from apps.advisor.services import refresh_findings
    from apps.clusters.models import Cluster
    from apps.collector.inventory import pods_from_objects
    from apps.telemetry.ingest import ingest, ingest_readings
    from apps.telemetry.readings import Batch, CounterReading, NodeInfo

    django_user_model.objects.create_user("ops", password=PASSWORD)
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "kubelet" / "pods-in-place-resize.json"
    [pod], _ = pods_from_objects(json.loads(fixture.read_text())["items"])
    [container] = pod.containers
    burstable = dataclasses.replace(
        pod,
        name="resized-burstable",
        uid="uid-resized-burstable",
        qos_class="Burstable",
        containers=(dataclasses.replace(container, request_mcpu=100, spec_request_mcpu=None, spec_limit_mcpu=None),),
        resize_status="",
    )
    pending = dataclasses.replace(pod, resize_status="In progress", resize_message="")
    now = timezone.now().replace(microsecond=0)
    cluster = Cluster.objects.create(name="resizing", source="kubernetes")
    node = NodeInfo(name=pod.node, capacity_mcpu=4000, allocatable_mcpu=3800, kernel_version="6.6.96-0-virt",
                    kubelet_version="v1.34.1")  # fmt: skip
    ingest(cluster, Batch(nodes=[node], pods=[pending, burstable]), now=now)
    readings = [
        CounterReading(
            namespace=p.namespace,
            pod=p.name,
            container=container.name,
            ts=now - timedelta(minutes=30 - m),
            periods_total=m * 600,
            throttled_periods_total=m * 360,
            throttled_seconds_total=m * 18.0,
            usage_seconds_total=m * 60 * 0.198,
            threads=2,
            period_us=100_000,
            node=pod.node,
        )
        for p in (pending, burstable)
        for m in range(31)
    ]
    ingest_readings(cluster, readings, now=now)
    refresh_findings(cluster, now=now)
    return live_server.url


@pytest.fixture()
def resize_browser(resize_site: str) -> Iterator:
    yield from chromium()


def test_the_pod_page_shows_a_resize_in_progress_and_offers_a_resize_only_where_the_qos_class_holds(
    resize_browser, resize_site
):
    page, errors = logged_in_page(resize_browser, resize_site, LAPTOP)
    page.goto(f"{resize_site}/c/resizing/ns/default/pod/resized-pod/")
    page.wait_for_selector("#resize-status")
    assert "In-place resize: In progress" in page.locator("#resize-status").inner_text()
    applied = page.locator("#resize-resized-container").inner_text()
    assert "Applied now: request 200m, limit 200m; the spec asks request 500m, limit 500m" in applied
    plan = page.locator("article.rec").first
    plan.wait_for()
    # Raising only the limit would make the Guaranteed pod Burstable, which a resize may not do: no patch line.
    assert plan.locator(".snippet.resize").count() == 0
    assert "No in-place resize: the pod is Guaranteed" in plan.locator(".no-resize").inner_text()
    shoot(page, "pod-resize-in-progress-laptop")

    page.goto(f"{resize_site}/c/resizing/ns/default/pod/resized-burstable/")
    patch = page.locator(".snippet.resize pre").first
    patch.wait_for()
    line = patch.inner_text()
    assert line.startswith("kubectl patch pod resized-burstable -n default --subresource resize")
    assert '"limits":{"cpu":' in line.replace(" ", "")
    shoot(page, "pod-resize-patch-laptop")
    assert errors == []


@pytest.fixture()
def change_site(live_server, django_user_model) -> str:
    from tests.advisor.test_change_effect import raised

    django_user_model.objects.create_user("ops", password=PASSWORD)
    raised(ratio_after=0.03, minutes_after=70)  # cluster c, shop/api-0: limit 200m → 400m 70 minutes ago
    return live_server.url


@pytest.fixture()
def change_browser(change_site: str) -> Iterator:
    yield from chromium()


def test_a_change_is_marked_on_the_pod_chart_and_listed_with_its_effect_on_the_namespace_page(
    change_browser, change_site
):
    page, errors = logged_in_page(change_browser, change_site, LAPTOP)
    page.goto(f"{change_site}/c/c/ns/shop/pod/api-0/?window=24h")  # the change was 70 minutes ago
    chart = page.locator(".js-plotly-plot").first
    chart.locator(".main-svg").first.wait_for()
    layout = chart.evaluate("el => ({shapes: el.layout.shapes || [], notes: el.layout.annotations.map(a => a.text)})")
    [line] = [s for s in layout["shapes"] if s.get("line", {}).get("dash") == "dot"]
    assert line["yref"] == "paper" and line["x0"] == line["x1"]
    assert "limit 200m → 400m, improved" in layout["notes"]
    assert page.locator(".annotation-text", has_text="limit 200m → 400m, improved").count() == 1  # drawn, not only set
    shoot_chart(page, "pod-change-marker")

    page.goto(f"{change_site}/c/c/ns/shop/")
    section = page.locator("#changes")
    section.wait_for()
    row = section.locator("tbody tr[data-kind='limit']")
    assert "limit: 200m → 400m" in row.inner_text() and row.locator(".verdict-change-improved").count() == 1
    shoot(page, "namespace-changes-laptop")
    assert errors == []


@pytest.fixture()
def rollout_site(live_server, django_user_model) -> str:
    from tests.advisor.test_change_effect import rolled_out

    django_user_model.objects.create_user("ops", password=PASSWORD)
    rolled_out()  # cluster c, Deployment web: one 200m pod replaced by two 400m pods 70 minutes ago
    return live_server.url


@pytest.fixture()
def rollout_browser(rollout_site: str) -> Iterator:
    yield from chromium()


def test_a_rollout_is_one_row_on_the_namespace_page_and_marked_on_each_new_pods_chart(rollout_browser, rollout_site):
    page, errors = logged_in_page(rollout_browser, rollout_site, LAPTOP)
    page.goto(f"{rollout_site}/c/c/ns/shop/")
    section = page.locator("#changes")
    section.wait_for()
    [row] = section.locator("tbody tr").all()
    text = row.inner_text()
    assert "limit: 200m → 400m" in text and "request: 200m → 400m" in text
    assert "and 1 more pod" in text and "rollout, after web-5d8f-aaaaa" in text
    assert row.locator(".verdict-change-improved").count() == 1
    shoot(page, "namespace-rollout-laptop")
    for pod in ("web-7c9a-bbbbb", "web-7c9a-ccccc"):  # the first new pod stands for the change; the other is in it
        page.goto(f"{rollout_site}/c/c/ns/shop/pod/{pod}/?window=24h")
        chart = page.locator(".js-plotly-plot").first
        chart.locator(".main-svg").first.wait_for()
        notes = chart.evaluate("el => el.layout.annotations.map(a => a.text)")
        assert "limit 200m → 400m, request 200m → 400m, improved" in notes, (pod, notes)
        # Drawn, not only set: the mark at the new pod's first inventory is inside the axis, before its first sample.
        drawn = page.locator(".annotation-text", has_text="limit 200m → 400m, request 200m → 400m, improved")
        assert drawn.count() == 1, pod
    shoot_chart(page, "pod-rollout-marker")
    assert errors == []
