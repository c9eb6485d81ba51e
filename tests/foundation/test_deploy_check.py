"""`manage.py check --deploy` is clean with production settings (HTTPS behind a proxy, real secret, real host)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(60),
    "ALLOWED_HOSTS": "cputune.example.com",
    "CPUTUNE_SSL_REDIRECT": "1",
    "CPUTUNE_HSTS_SECONDS": "31536000",
    "CPUTUNE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "CPUTUNE_HSTS_PRELOAD": "1",
    "CPUTUNE_BEHIND_TLS_PROXY": "1",
}


def check_deploy(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "CPUTUNE_SECURE_COOKIES"}}
    clean.update(CPUTUNE_DATA_DIR=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = check_deploy(tmp_path, **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_deploy_flags_a_site_without_https_settings(tmp_path):
    insecure = {**PRODUCTION, "CPUTUNE_SSL_REDIRECT": "0", "CPUTUNE_HSTS_SECONDS": "0"}
    result = check_deploy(tmp_path, **insecure)
    assert result.returncode != 0
    assert "security.W004" in result.stderr + result.stdout  # no HSTS
    assert "security.W008" in result.stderr + result.stdout  # no SSL redirect
