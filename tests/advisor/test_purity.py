"""The advisor's core imports no web or task framework, directly or through the project modules it uses.

Every module in apps/advisor except the framework-facing ones (services write, selectors read, models, tasks,
receivers, apps, admin, migrations) is parsed with ast; each `apps.…` module it imports (and the packages on the way)
is parsed too, transitively. An import
of Django, DRF or Celery anywhere in that closure fails the test, even inside a function or under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADVISOR = ROOT / "apps" / "advisor"
FRAMEWORK_FACING = {
    "services.py",
    "selectors.py",
    "models.py",
    "tasks.py",
    "receivers.py",
    "apps.py",
    "admin.py",
    # Reading stored changes and their samples, checking stored advice, reading the settings' policy.
    "changes.py",
    "advice_followed.py",
    "policy.py",
}
FORBIDDEN = {"django", "rest_framework", "celery", "kombu", "django_filters", "drf_spectacular"}


def _imported_modules(source: str, module: str, is_package: bool) -> list[str]:
    """Absolute names of every module an ast import statement in `source` names (relative ones resolved)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                base = parts if is_package else parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            names.append(target)
            # `from apps.advisor import cfs` imports a module too
            names.extend(f"{target}.{alias.name}" for alias in node.names)
    return names


def _module_file(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def framework_imports(start: list[Path]) -> dict[str, list[str]]:
    """For each module reached from `start` through `apps.…` imports: the forbidden imports it makes."""
    found: dict[str, list[str]] = {}
    pending = list(start)
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        module = _module_name(path)
        # Importing a.b.c runs a/__init__ and a/b/__init__ first.
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package_init = _module_file(".".join(parts[:depth]))
            if package_init is not None:
                pending.append(package_init)
        for name in _imported_modules(path.read_text(), module, path.name == "__init__.py"):
            top = name.split(".")[0]
            if top in FORBIDDEN:
                found.setdefault(module, []).append(name)
            elif top == "apps":
                target = _module_file(name)
                if target is not None:
                    pending.append(target)
    return found


def _core_modules() -> list[Path]:
    return [
        path
        for path in sorted(ADVISOR.rglob("*.py"))
        if path.name not in FRAMEWORK_FACING and "migrations" not in path.relative_to(ADVISOR).parts
    ]


def test_the_advisor_core_imports_no_framework() -> None:
    modules = _core_modules()
    assert {p.name for p in modules} >= {"cfs.py", "windows.py", "rules.py", "explain.py"}
    assert framework_imports(modules) == {}


def test_the_walk_follows_project_imports_into_the_modules_the_core_uses() -> None:
    reached: set[str] = set()
    for path in _core_modules():
        module = _module_name(path)
        reached.update(
            n for n in _imported_modules(path.read_text(), module, path.name == "__init__.py") if n.startswith("apps.")
        )
    assert {
        "apps.clusters.kubelet",
        "apps.telemetry.counters",
        "apps.words",
        "apps.advisor.kernel",
    } <= reached


@pytest.mark.parametrize(
    "source",
    [
        "import django",
        "from django.db import models",
        "from rest_framework import serializers",
        "import celery.app.task",
        "def f():\n    from django.conf import settings\n    return settings",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from django.http import HttpRequest",
    ],
)
def test_the_checker_catches_a_framework_import_wherever_it_hides(source: str) -> None:
    assert any(name.split(".")[0] in FORBIDDEN for name in _imported_modules(source, "apps.advisor.x", False))


def test_relative_imports_are_resolved_against_the_package() -> None:
    names = _imported_modules("from .cfs import quota_shape\nfrom .. import telemetry", "apps.advisor.rules", False)
    assert "apps.advisor.cfs" in names
    assert "apps.telemetry" in names
