"""Settings read the environment and refuse bad values with a message naming the variable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_settings(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}}
    clean.update({"DJANGO_SETTINGS_MODULE": "cputune.settings", "CPUTUNE_DATA_DIR": "/tmp/cputune-settings-test"})
    clean.update(env)
    code = "import django; django.setup(); from django.conf import settings; print(settings.DATABASES['default']['ENGINE'])"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60)


def test_defaults_to_sqlite_in_debug():
    result = load_settings(DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.db.backends.sqlite3"


def test_postgres_url_selects_postgresql():
    result = load_settings(DEBUG="1", DATABASE_URL="postgres://u:p@db.example:5432/cputune")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "django.db.backends.postgresql"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"DEBUG": "1", "DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL='mysql://u@h/db' is not understood"),
        ({"DEBUG": "1", "DATABASE_URL": "postgres//localhost/db"}, "is not understood"),
        ({"DEBUG": "1", "DATABASE_URL": "postgres://localhost:notaport/db"}, "is malformed"),
        ({"DEBUG": "1", "DATABASE_URL": "postgres://localhost:5432"}, "names no database"),
        ({"DEBUG": "0"}, "SECRET_KEY is required"),
        ({"DEBUG": "1", "CPUTUNE_COLLECT_INTERVAL": "soon"}, "CPUTUNE_COLLECT_INTERVAL='soon' is not an integer"),
        ({"DEBUG": "1", "CPUTUNE_THROTTLE_TARGET": "1.5"}, "CPUTUNE_THROTTLE_TARGET=1.5 must lie between"),
        ({"DEBUG": "1", "REDIS_URL": "http://cache:6379"}, "is not a redis:// URL"),
    ],
)
def test_bad_values_fail_loudly_naming_the_variable(env, message):
    result = load_settings(**env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr


def test_beat_entries_expire_just_under_their_interval():
    from cputune.settings import _beat_schedule

    schedule = _beat_schedule(60)
    for entry in schedule.values():
        assert 0 < entry["options"]["expires"] < entry["schedule"]
    assert schedule["collect-all-clusters"]["schedule"] == 60.0


def test_without_secret_key_in_the_environment_the_key_make_run_generated_is_used(tmp_path):
    """`make run` writes var/secret_key; commands run in another terminal (create_token, lab status) must sign with
    it instead of failing for want of SECRET_KEY."""
    (tmp_path / "secret_key").write_text("generated-by-make-run-" + "x" * 40 + "\n")
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}}
    env.update({"DJANGO_SETTINGS_MODULE": "cputune.settings", "CPUTUNE_DATA_DIR": str(tmp_path)})
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "generated-by-make-run-" + "x" * 40
    env["SECRET_KEY"] = "from-the-environment-wins-" + "y" * 30
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == env["SECRET_KEY"]


def test_every_variable_the_settings_and_make_run_read_is_in_env_example_and_the_readme():
    read = set()
    for source in ("cputune/settings.py", "cputune/launcher.py"):
        text = (ROOT / source).read_text()
        read |= set(
            re.findall(r"(?:env_bool|env_int|env_float|env_list|environ\.get|env\.get)\(\s*\"([A-Z_]+)\"", text)
        )
    assert {"SECRET_KEY", "CPUTUNE_PORT", "CPUTUNE_HOST", "DATABASE_URL"} <= read
    example = set(re.findall(r"^([A-Z_]+)=", (ROOT / ".env.example").read_text(), flags=re.M))
    readme = (ROOT / "README.md").read_text()
    assert read - example == set()
    assert {name for name in read if f"`{name}`" not in readme} == set()
