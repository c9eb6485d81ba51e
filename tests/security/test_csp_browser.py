"""Under the Content-Security-Policy every page works in a real browser (Debian's Chromium against a live server):
no violation is reported, the Plotly charts are drawn and Swagger UI lists the API's operations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboard.conftest import PASSWORD
from tests.dashboard.test_browser import LAPTOP, browser, shoot, site  # noqa: F401

# Seven pages, each waited on until its network is idle: generous, as CI runs beside other suites on 2 cores.
TIMEOUT_MS = 30_000

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Registered before any page script: every violation the browser reports, also those of scripts it refused to run.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + e.sourceFile);
});
"""


class Watched:
    """A page whose CSP violations (events and console reports) and JavaScript errors are collected."""

    def __init__(self, chromium: Any) -> None:
        context = chromium.new_context(viewport=LAPTOP)
        context.set_default_timeout(TIMEOUT_MS)
        context.add_init_script(RECORD_VIOLATIONS)
        self.page = context.new_page()
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.page.on("console", self.console)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.violations.append(f"console: {message.text}")

    def visit(self, url: str, ready: str) -> None:
        response = self.page.goto(url)
        assert response is not None and "script-src 'self'" in (response.headers["content-security-policy"] or "")
        self.page.wait_for_selector(ready)
        self.page.wait_for_load_state("networkidle")
        self.violations += [f"{url}: {v}" for v in self.page.evaluate("window.__cspViolations")]


def test_every_kind_of_page_renders_under_the_policy_with_no_violation(browser, site: str) -> None:  # noqa: F811
    watched = Watched(browser)
    page = watched.page
    watched.visit(f"{site}/accounts/login/", "#id_username")
    page.fill("#id_username", "ops")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{site}/")
    watched.visit(f"{site}/", "main")
    watched.visit(f"{site}/c/demo/", "#nodes tbody tr")
    watched.visit(f"{site}/c/demo/ns/shop/", "#report tbody tr")
    watched.visit(f"{site}/c/demo/ns/shop/pod/api-0/", ".js-plotly-plot svg.main-svg")
    assert page.locator(".js-plotly-plot").count() == 2  # the container's figures and its limit curve
    assert page.locator(".js-plotly-plot .plot-container svg.main-svg").count() >= 2
    assert page.locator(".js-plotly-plot .scatterlayer .trace").count() > 0  # lines drawn, not just axes
    shoot(page, "csp-pod-laptop")
    watched.visit(f"{site}/c/demo/node/demo-node-0/", ".js-plotly-plot svg.main-svg")
    watched.visit(f"{site}/api/docs/", ".swagger-ui .opblock-summary-path")
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/v1/kernel-check/" in paths
    shoot(page, "csp-api-docs-laptop")
    assert watched.violations == [] and watched.errors == []


def test_an_inline_script_would_be_refused_and_counted(browser, site: str) -> None:  # noqa: F811
    """The watcher itself sees a violation: a page that runs an inline script under this site's policy."""
    watched = Watched(browser)
    watched.visit(f"{site}/accounts/login/", "#id_username")
    watched.page.evaluate("""() => { const s = document.createElement("script"); s.textContent = "window.ran = 1";
                                     document.body.appendChild(s); }""")
    watched.page.wait_for_timeout(200)
    assert watched.page.evaluate("window.ran") is None
    assert len(watched.page.evaluate("window.__cspViolations")) == 1
