"""Logins are locked after repeated wrong passwords, every page carries a strict Content-Security-Policy, outside
DEBUG a weak SECRET_KEY is refused, and `manage.py check --deploy` is clean with the README's production settings."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from apps.api.services import create_token

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "the-right-password-1"
LIMIT = 5  # CPUTUNE_LOGIN_FAILURE_LIMIT's default


@pytest.fixture()
def fast_hashing(settings) -> None:
    # A real hasher costs a fraction of a second per attempt; the lockout counts attempts, not hashing cost.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture()
def person(db, fast_hashing):
    return get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True, is_superuser=True)


def attempt(client: Client, url: str, password: str, username: str = "ops"):
    return client.post(url, {"username": username, "password": password})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_after_five_wrong_passwords_even_the_right_one_is_refused_with_the_lockout_page(person, url):
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(LIMIT - 1):
        assert attempt(client, url, "wrong").status_code == 200  # the form again, with its error
    locked = attempt(client, url, "wrong")  # the fifth
    assert locked.status_code == 429
    response = attempt(client, url, PASSWORD)
    assert response.status_code == 429 and not logged_in(client)
    page = response.content.decode()
    assert "Login locked" in page and "Try again in 15 minutes" in page and "ops" in page
    # Another address may still log in as ops, and this address as someone else: the lock is per username and IP.
    other_ip = Client(REMOTE_ADDR="198.51.100.9")
    assert attempt(other_ip, url, PASSWORD).status_code == 302 and logged_in(other_ip)
    get_user_model().objects.create_user("dev", password=PASSWORD, is_staff=True)
    assert attempt(client, url, PASSWORD, username="dev").status_code == 302


def test_fewer_wrong_passwords_than_the_limit_then_the_right_one_logs_in_and_starts_the_count_again(person):
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(LIMIT - 1):
        attempt(client, "/accounts/login/", "wrong")
    assert attempt(client, "/accounts/login/", PASSWORD).status_code == 302
    client.logout()
    for _ in range(LIMIT - 1):
        attempt(client, "/accounts/login/", "wrong")
    assert attempt(client, "/accounts/login/", PASSWORD).status_code == 302


def test_an_administrator_unlocks_with_axes_reset(person):
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(LIMIT):
        attempt(client, "/accounts/login/", "wrong")
    assert attempt(client, "/accounts/login/", PASSWORD).status_code == 429
    call_command("axes_reset_username", "ops")
    assert attempt(client, "/accounts/login/", PASSWORD).status_code == 302 and logged_in(client)


def test_a_locked_out_user_s_api_token_still_works(person):
    """Tokens never go through the login form's authenticate(): the API is neither counted nor locked."""
    key = create_token(person, "read")[1]
    client = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(LIMIT + 1):
        attempt(client, "/accounts/login/", "wrong")
    assert attempt(client, "/accounts/login/", PASSWORD).status_code == 429
    api = Client(REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/clusters/").status_code == 200
    bearer = Client(REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert bearer.get("/api/v1/clusters/").status_code == 200
    # A wrong token is a 401 as before, never a lockout page.
    wrong = Client(REMOTE_ADDR="203.0.113.7", HTTP_AUTHORIZATION="Token not-a-key")
    assert wrong.get("/api/v1/clusters/").status_code == 401


def policy(header: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (part.strip() for part in header.split(";")) if d}


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/", "/api/docs/", "/healthz"])
def test_every_page_carries_the_strict_policy(db, client, url):
    response = client.get(url)
    assert response.status_code == 200
    directives = policy(response.headers["Content-Security-Policy"])
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]  # no inline script, no other host
    assert directives["object-src"] == ["'none'"]
    assert directives["base-uri"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["form-action"] == ["'self'"]


def test_the_templates_hold_no_script_that_would_run_inline():
    """Scripts come from files; a <script> without src may only carry JSON data, which a policy does not block."""
    found = []
    for template in (ROOT / "templates").rglob("*.html"):
        for tag in re.findall(r"<script\b[^>]*>", template.read_text()):
            if "src=" not in tag and 'type="application/json"' not in tag:
                found.append(f"{template.relative_to(ROOT)}: {tag}")
        found += [f"{template.relative_to(ROOT)}: {m}" for m in re.findall(r"\son[a-z]+=\"", template.read_text())]
    assert found == []


def load_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}}
    clean.update(DJANGO_SETTINGS_MODULE="cputune.settings", CPUTUNE_DATA_DIR=str(tmp_path), **env)
    code = "import django; django.setup(); from django.conf import settings; print(len(settings.SECRET_KEY))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "key",
    ["ci-only-not-secret", "x" * 49 + "y", "abcd" * 20, secrets.token_urlsafe(50)[:49]],
    ids=["short", "one-short-of-50", "four-distinct-characters", "49-random"],
)
def test_outside_debug_a_weak_secret_key_is_refused_saying_how_to_make_one(tmp_path, key):
    result = load_settings(tmp_path, DEBUG="0", SECRET_KEY=key)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "SECRET_KEY is too weak" in result.stderr
    assert "secrets.token_urlsafe(50)" in result.stderr
    # The same key in the data folder (as if written by hand) is refused too.
    (tmp_path / "secret_key").write_text(key)
    assert "SECRET_KEY is too weak" in load_settings(tmp_path, DEBUG="0").stderr


def test_with_debug_a_short_key_is_accepted_as_ci_uses_it(tmp_path):
    result = load_settings(tmp_path, DEBUG="1", SECRET_KEY="ci-only-not-secret")
    assert result.returncode == 0, result.stderr


def test_the_key_make_run_generates_passes_outside_debug(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env["CPUTUNE_DATA_DIR"] = str(tmp_path)
    code = "from cputune.launcher import prepare_env; prepare_env()"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=60)
    assert (tmp_path / "secret_key").is_file()
    result = load_settings(tmp_path, DEBUG="0")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) >= 50


def readme_production_settings() -> dict[str, str]:
    """The `NAME=value` lines of the README's production HTTPS block."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n# HTTPS in production\n(.*?)```", readme, flags=re.S)
    assert block, "README.md lost its production HTTPS block"
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", block.group(1), flags=re.M))


def test_check_deploy_is_clean_with_the_readme_s_production_settings(tmp_path):
    production = readme_production_settings()
    assert {"CPUTUNE_SSL_REDIRECT", "CPUTUNE_HSTS_SECONDS", "CPUTUNE_BEHIND_TLS_PROXY"} <= set(production)
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "CPUTUNE_SECURE_COOKIES"}}
    env.update(production, DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), CPUTUNE_DATA_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
