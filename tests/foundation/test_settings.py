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


def test_a_production_server_started_before_collectstatic_serves_its_pages_and_their_styles(tmp_path):
    """DEBUG=0 and no `collectstatic`: the login page and its stylesheet are served (they were a 500 for want of
    the staticfiles manifest)."""
    code = (
        "import django, re; django.setup(); from django.test import Client; c = Client(HTTP_HOST='127.0.0.1'); "
        "page = c.get('/accounts/login/'); css = re.search(r'href=\"(/static/[^\"]+[.]css)\"', page.content.decode()); "
        "print(page.status_code, css and b''.join(c.get(css.group(1)).streaming_content)[:20] != b'')"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}}
    env.update({"DJANGO_SETTINGS_MODULE": "cputune.settings", "CPUTUNE_DATA_DIR": str(tmp_path), "DEBUG": "0",
                "SECRET_KEY": "production-like-" + "z" * 40})  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["200", "True"], result.stdout + result.stderr[-3000:]
    # After collectstatic the same page links the hashed, cacheable copies.
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True,
                   timeout=120)  # fmt: skip
    hashed = code.replace("print(page.status_code, css and", "print(page.status_code, css.group(1), css and")
    result = subprocess.run(
        [sys.executable, "-c", hashed], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    status, href, served = result.stdout.split()
    assert (status, served) == ("200", "True") and re.search(r"\.[0-9a-f]{12}\.css$", href), result.stdout


WRITER = """
import sys, time, django
django.setup()
from django.db import connection, transaction
with connection.cursor() as c:
    c.execute("CREATE TABLE IF NOT EXISTS writers (n INTEGER)")
if sys.argv[1] == "reads-first":
    with transaction.atomic(), connection.cursor() as c:
        c.execute("SELECT count(*) FROM writers")
        time.sleep(1.5)
        c.execute("INSERT INTO writers VALUES (1)")
else:
    time.sleep(0.5)
    with transaction.atomic(), connection.cursor() as c:
        c.execute("INSERT INTO writers VALUES (2)")
print("stored")
"""


def test_two_processes_writing_the_default_sqlite_file_wait_for_each_other_instead_of_failing(tmp_path):
    """make run's worker and a `collect --once` in another terminal write one SQLite file: a transaction that read
    before the other's commit and writes after it must wait its turn, not fail with "database is locked"."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "REDIS_URL"}}
    env.update({"DJANGO_SETTINGS_MODULE": "cputune.settings", "CPUTUNE_DATA_DIR": str(tmp_path), "DEBUG": "1"})
    subprocess.run([sys.executable, "-c", WRITER, "setup"], cwd=ROOT, env=env, check=True, timeout=60)
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, role], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for role in ("reads-first", "writes-meanwhile")
    ]  # fmt: skip
    outcomes = [p.communicate(timeout=60) for p in procs]
    assert [out.strip() for out, _ in outcomes] == ["stored", "stored"], [err[-500:] for _, err in outcomes]
