"""What `docker build` sends into the image: the product, never the test doubles, tests or benchmarks."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import PurePosixPath

from tests.foundation.test_settings import ROOT


def build_context() -> set[str]:
    """The tracked files left after .dockerignore (each pattern also excludes everything below a matched folder)."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()

    def ignored(path: str) -> bool:
        parts = PurePosixPath(path).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(fnmatch.fnmatch(prefix, p) for p in patterns for prefix in prefixes)

    return {f for f in files if not ignored(f)}


def test_the_image_holds_the_product_and_none_of_the_test_doubles():
    context = build_context()
    assert {"manage.py", "requirements.txt", "cputune/settings.py", "agent/cputune_agent.py"} <= context
    assert any(f.startswith("templates/") for f in context) and any(f.startswith("static/") for f in context)
    leaked = sorted(f for f in context if f.split("/")[0] in {"standins", "tests", "benchmarks"})
    assert leaked == []
