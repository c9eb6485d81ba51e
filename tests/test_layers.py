"""Layers: the dashboard and the API both sit above the advisor and never import each other (or the advisor them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.advisor.test_purity import _imported_modules, _module_name

ROOT = Path(__file__).resolve().parents[1]


def imports_of(package: str) -> dict[str, set[str]]:
    """Every `apps.…` module each module of `package` imports (relative imports resolved)."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "apps" / package).rglob("*.py")):
        module = _module_name(path)
        names = _imported_modules(path.read_text(), module, path.name == "__init__.py")
        out[module] = {name for name in names if name.startswith("apps.")}
    return out


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("dashboard", ("apps.api",)), ("api", ("apps.dashboard",)), ("advisor", ("apps.api", "apps.dashboard"))],
)
def test_a_layer_imports_nothing_from_beside_or_above_it(package: str, forbidden: tuple[str, ...]) -> None:
    crossing = {
        module: sorted(name for name in names if any(name == p or name.startswith(p + ".") for p in forbidden))
        for module, names in imports_of(package).items()
    }
    assert {module: names for module, names in crossing.items() if names} == {}


def test_the_walk_sees_the_imports_a_layer_does_make() -> None:
    assert "apps.advisor.selectors" in imports_of("dashboard")["apps.dashboard.views"]
    assert "apps.advisor.export" in imports_of("api")["apps.api.views"]
