"""GET kernel-check/?version=: verdicts on real kernelVersion strings (tests/fixtures/kernel_versions.txt).

Expected verdicts come from docs/domain.md#fixed-versions: the fix is in 4.14.154, 4.19.84, 5.3.9 and 5.4; Amazon Linux 2 names the
real sublevel (4.14.133 has 512ac999d275 but not the fix: slice expiry); COS has no backport record (unknown below
the fix); Ubuntu 18.04's first fixed generic build is 4.15.0-69.78.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/kernel-check/"


def real_strings(fixtures_dir) -> set[str]:
    lines = (fixtures_dir / "kernel_versions.txt").read_text().splitlines()
    return {line.split("\t")[0] for line in lines if line and not line.startswith("#")}


@pytest.mark.parametrize(
    ("version", "verdict", "bug"),
    [
        ("4.14.133-113.105.amzn2.x86_64", "affected", "slice_expiry"),
        ("4.14.165-131.185.amzn2.x86_64", "fixed", None),
        ("5.15.0-1028-aws", "fixed", None),
        ("6.1.100+", "fixed", None),
        ("4.14.56+", "unknown", None),
    ],
)
def test_real_kernel_strings_get_their_verdict(reader, fixtures_dir, version, verdict, bug):
    assert version in real_strings(fixtures_dir)
    response = reader.get(URL, {"version": version})
    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["version", "verdict", "bug", "fixed_in", "confidence", "reasons"]
    assert (body["version"], body["verdict"], body["bug"]) == (version, verdict, bug)
    assert body["reasons"] and all(isinstance(reason, str) for reason in body["reasons"])
    assert body["confidence"] in ("high", "medium", "low")
    assert (body["fixed_in"] == []) == (verdict == "fixed")


def test_an_affected_ubuntu_build_names_the_first_fixed_build(reader):
    body = reader.get(URL, {"version": "4.15.0-66-generic"}).json()
    assert body["verdict"] == "affected" and body["fixed_in"] == ["4.15.0-69.78"]


def test_every_real_kernel_string_is_answered_with_a_verdict(reader, fixtures_dir):
    for version in sorted(real_strings(fixtures_dir)):
        response = reader.get(URL, {"version": version})
        assert response.status_code == 200, (version, response.content)
        assert response.json()["version"] == version


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("10.0.17763.1577", "Windows"),  # a Windows node's kernelVersion
        ("4.4.0-19041-Microsoft", "WSL 1"),
        ("1.2.3", "Could not read a Linux kernel release"),
    ],
)
def test_a_release_string_without_a_known_verdict_is_unknown_not_an_error(reader, version, reason):
    response = reader.get(URL, {"version": version})
    assert response.status_code == 200
    body = response.json()
    assert body["verdict"] == "unknown" and reason in body["reasons"][0]


@pytest.mark.parametrize(
    "version",
    ["not a kernel", "hello", "'; drop", "99999999999999999999.1", "v5.4.0", "5.4.0 (Ubuntu)", "5.", "x" * 300],
)
def test_a_string_that_is_no_kernel_release_is_a_400_saying_what_to_give(reader, version):
    response = reader.get(URL, {"version": version})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    [message] = response.json()["version"]
    assert message.startswith("version is not a kernel release") and "uname -r" in message
    assert repr(version[:40]) in message and len(message) < 200


@pytest.mark.parametrize("params", [{}, {"version": ""}, {"version": "   "}])
def test_a_missing_or_empty_version_is_a_400_saying_what_to_give(reader, params):
    response = reader.get(URL, params)
    assert response.status_code == 400
    [message] = response.json()["version"]
    assert message.startswith("version is") and "uname -r" in message
