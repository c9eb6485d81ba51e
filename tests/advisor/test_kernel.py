"""Kernel verdicts for the CFS slice expiry bug (docs/domain.md#kernel-verdicts).

Every expected verdict here is written by hand from the rules and vendor table of docs/domain.md#kernel-verdicts and #vendor-table, never copied from the
code's output: fixed = mainline >= 5.4, 5.3.y >= 5.3.9, 4.19.y >= 4.19.84, 4.14.y >= 4.14.154, or a vendor build at
or past its first fixed build; slice_expiry = 512ac999d275 without the fix; clock_drift = 3.16..4.17 lines without
512ac999d275; unknown = a vendor base below the fix with no vendor record.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.advisor import kernel
from apps.advisor.kernel import (
    VENDOR_BACKPORTS,
    KernelVerdict,
    compare_vendor_builds,
    is_kernel_release,
    kernel_verdict,
    parse_kernel_version,
    vendor_build_key,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_versions.txt"


def fixture_versions() -> list[str]:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[0] for line in lines if line.strip() and not line.startswith("#")]


def assert_well_formed(result: KernelVerdict) -> None:
    assert result.verdict in ("fixed", "affected", "unknown")
    assert result.confidence in ("high", "medium", "low")
    assert result.reasons, "every verdict explains itself"
    assert all(isinstance(reason, str) and reason.strip() for reason in result.reasons)
    if result.verdict == "affected":
        assert result.fixed_in, "an affected node must be told where to move"
    if result.verdict == "fixed":
        assert result.fixed_in == ()
        assert result.bug is None


# --- The real strings of tests/fixtures/kernel_versions.txt ------------------------------------------------------

# Amazon Linux 2 4.14 builds below 4.14.97-90.72.amzn2 (from which AL2 carried 512ac999d275): clock drift.
AL2_CLOCK_DRIFT = [
    "4.14.26-54.32.amzn2.x86_64",
    "4.14.42-61.37.amzn2.x86_64",
    "4.14.47-63.37.amzn2.x86_64",
    "4.14.47-64.38.amzn2.x86_64",
    "4.14.55-68.37.amzn2.x86_64",
    "4.14.59-68.43.amzn2.x86_64",
    "4.14.62-70.117.amzn2.x86_64",
    "4.14.67-71.56.amzn2.x86_64",
    "4.14.77-80.57.amzn2.x86_64",
    "4.14.77-86.82.amzn2.x86_64",
    "4.14.88-88.73.amzn2.x86_64",
    "4.14.88-88.76.amzn2.x86_64",
    "4.14.94-89.73.amzn2.x86_64",
]
# From 4.14.97-90.72.amzn2 up to (not including) 4.14.154-128.181.amzn2: slice expiry.
AL2_SLICE_EXPIRY = [
    "4.14.109-99.92.amzn2.x86_64",
    "4.14.114-105.126.amzn2.x86_64",
    "4.14.123-111.109.amzn2.x86_64",
    "4.14.128-112.105.amzn2.x86_64",
    "4.14.133-113.105.amzn2.x86_64",
    "4.14.133-113.112.amzn2.x86_64",
    "4.14.138-114.102.amzn2.x86_64",
    "4.14.146-120.181.amzn2.x86_64",
]
# Base 4.14.154 or later (Amazon Linux names the real sublevel), or a 5.4+ line of any vendor.
FIXED_BY_BASE = [
    "4.14.165-131.185.amzn2.x86_64",
    "4.14.165-133.209.amzn2.x86_64",
    "4.14.171-136.231.amzn2.x86_64",
    "4.14.173-137.228.amzn2.x86_64",
    "4.14.181-140.257.amzn2.x86_64",
    "4.14.209-160.339.amzn2.x86_64",
    "4.14.219-161.340.amzn2.x86_64",
    "4.14.219-164.354.amzn2.x86_64",
    "4.14.225-168.357.amzn2.x86_64",
    "4.14.225-169.362.amzn2.x86_64",
    "4.14.231-173.360.amzn2.x86_64",
    "4.14.231-173.361.amzn2.x86_64",
    "4.14.241-184.433.amzn2.x86_64",
    "4.14.248-189.473.amzn2.aarch64",
    "4.14.252-195.481.amzn2.x86_64",
    "5.10.184-175.731.amzn2.aarch64",
    "5.10.210-201.855.amzn2.x86_64",
    "5.10.238-231.953.amzn2.x86_64",
    "5.10.25-linuxkit",
    "5.10.29-27.128.amzn2.x86_64",
    "5.10.47-39.130.amzn2.x86_64",
    "5.10.50-44.132.amzn2.x86_64",
    "5.10.68-62.173.amzn2.x86_64",
    "5.10.75-79.358.amzn2.x86_64",
    "5.10.82-83.359.amzn2.x86_64",
    "5.10.84-flatcar",
    "5.15.0-1028-aws",
    "5.15.0-152-generic",
    "5.4.0-1059-azure",
    "5.4.231-137.341.amzn2.x86_64",
    "6.1.100+",
    "6.1.112-122.189.amzn2023.x86_64",
    "6.1.134-152.225.amzn2023.x86_64",
    "6.1.147-172.266.amzn2023.x86_64",
    "6.1.161-183.298.amzn2023.x86_64",
    "6.1.188-233.385.amzn2023.x86_64",
    "6.1.66-91.160.amzn2023.x86_64",
    "6.12.109-flatcar",
    "6.12.80-106.156.amzn2023.x86_64",
    "6.17.0-23-generic",
]
# Vendor base below the fix and no vendor record: COS (DOMAIN: "not found"), Amazon Linux 2's 4.9 kernels (no row).
UNKNOWN_VENDOR = [
    "4.14.56+",
    "4.14.91+",
    "4.9.62-10.57.amzn2.x86_64",
    "4.9.70-2.243.amzn2.x86_64",
    "4.9.75-1.56.amzn2.x86_64",
    "4.9.76-38.79.amzn2.x86_64",
    "4.9.81-44.57.amzn2.x86_64",
    "4.9.85-46.56.amzn2.x86_64",
]

FIXTURE_EXPECTATIONS: dict[str, tuple[str, str | None]] = {
    **dict.fromkeys(AL2_CLOCK_DRIFT, ("affected", "clock_drift")),
    **dict.fromkeys(AL2_SLICE_EXPIRY, ("affected", "slice_expiry")),
    **dict.fromkeys(FIXED_BY_BASE, ("fixed", None)),
    **dict.fromkeys(UNKNOWN_VENDOR, ("unknown", None)),
}


def test_every_fixture_string_has_a_hand_written_expectation() -> None:
    assert sorted(FIXTURE_EXPECTATIONS) == sorted(fixture_versions())


@pytest.mark.parametrize("version", fixture_versions())
def test_every_real_kernel_string_gets_a_well_formed_verdict(version: str) -> None:
    result = kernel_verdict(version)
    assert_well_formed(result)
    assert result.version == version
    assert "de53fd7aedb1" in " ".join(result.reasons), "the fix commit is always named"


@pytest.mark.parametrize(("version", "expected"), sorted(FIXTURE_EXPECTATIONS.items()))
def test_real_kernel_strings_get_the_verdict_the_rules_give(version: str, expected: tuple[str, str | None]) -> None:
    result = kernel_verdict(version)
    assert (result.verdict, result.bug) == expected


def test_amazon_linux_2_builds_below_the_fix_cite_the_reported_evidence() -> None:
    result = kernel_verdict("4.14.133-113.105.amzn2.x86_64")
    assert result.confidence == "medium"  # the AL2 rows are "reported" (issue threads), not an advisory
    assert result.fixed_in == ("4.14.154-128.181.amzn2",)
    assert "amazon-eks-ami#372" in " ".join(result.reasons)


# --- Upstream arithmetic and its boundaries -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "verdict", "bug"),
    [
        ("4.14.94", "affected", "clock_drift"),  # before 512ac999d275 reached 4.14.y
        ("4.14.95", "affected", "slice_expiry"),
        ("4.14.153", "affected", "slice_expiry"),
        ("4.14.154", "fixed", None),
        ("4.19.0", "affected", "slice_expiry"),
        ("4.19.83", "affected", "slice_expiry"),
        ("4.19.84", "fixed", None),
        ("5.3.0", "affected", "slice_expiry"),
        ("5.3.8", "affected", "slice_expiry"),
        ("5.3.9", "fixed", None),
        ("4.17", "affected", "clock_drift"),
        ("4.17.19", "affected", "clock_drift"),
        ("4.18", "affected", "slice_expiry"),
        ("4.18.0", "affected", "slice_expiry"),
        ("4.20.17", "affected", "slice_expiry"),
        ("5.2.21", "affected", "slice_expiry"),
        ("5.4.0", "fixed", None),
        ("5.4", "fixed", None),
        ("5.4.0-rc1", "fixed", None),
        ("6.0", "fixed", None),
        ("6.8.12", "fixed", None),
        ("4.9.337", "affected", "clock_drift"),  # 4.9.y never got either commit
        ("4.4.302", "affected", "clock_drift"),  # nor 4.4.y
        ("3.18.140", "affected", "clock_drift"),
        ("3.16.0", "affected", "clock_drift"),  # 51f2176d74ac is in v3.16
        ("3.16.81", "affected", "clock_drift"),  # 3.16.81 reverted 512ac999d275
        ("3.16.85", "affected", "clock_drift"),
        ("3.16.60", "affected", None),  # 512ac999d275 was in 3.16.y at some point before 3.16.81: either bug
        ("3.10.108", "affected", "slice_expiry"),  # before 51f2176d74ac slices expired as designed
        ("3.2.0", "affected", "slice_expiry"),
        ("3.1.10", "unknown", None),  # no CFS bandwidth control upstream before v3.2
        ("2.6.32", "unknown", None),
    ],
)
def test_upstream_versions_follow_the_commit_history(version: str, verdict: str, bug: str | None) -> None:
    result = kernel_verdict(version)
    assert (result.verdict, result.bug) == (verdict, bug)
    assert_well_formed(result)


@pytest.mark.parametrize(
    ("version", "fixed_in"),
    [
        ("4.14.100", ("4.14.154", "4.19.84", "5.4")),
        ("4.19.50", ("4.19.84", "5.4")),
        ("5.3.5", ("5.3.9", "5.4")),
        ("4.18.20", ("4.19.84", "5.4")),
        ("5.1.21", ("5.4",)),
        ("4.9.200", ("4.14.154", "4.19.84", "5.4")),
    ],
)
def test_an_affected_stable_kernel_is_told_its_own_lines_fix_and_5_4(version: str, fixed_in: tuple[str, ...]) -> None:
    assert kernel_verdict(version).fixed_in == fixed_in


def test_upstream_arithmetic_is_high_confidence_and_names_the_commits() -> None:
    result = kernel_verdict("4.19.83")
    assert result.confidence == "high"
    text = " ".join(result.reasons)
    for name in ("de53fd7aedb1", "763a9ec06c40", "CVE-2019-19922", "512ac999d275", "4.19.84"):
        assert name in text


def test_pre_3_16_verdict_is_an_inference_so_only_medium_confidence() -> None:
    result = kernel_verdict("3.10.108")
    assert result.confidence == "medium"
    assert "51f2176d74ac" in " ".join(result.reasons)


@pytest.mark.parametrize(("line", "fix_sublevel"), [((4, 14), 154), ((4, 19), 84), ((5, 3), 9)])
@given(sublevel=st.integers(min_value=0, max_value=400))
def test_a_stable_line_is_fixed_exactly_from_its_fix_release_on(
    line: tuple[int, int], fix_sublevel: int, sublevel: int
) -> None:
    result = kernel_verdict(f"{line[0]}.{line[1]}.{sublevel}")
    assert (result.verdict == "fixed") == (sublevel >= fix_sublevel)
    assert result.verdict != "unknown"


# --- Vendor rows of docs/domain.md#vendor-table on both sides of their first fixed build -----------------------------------------

# row line -> (a build just below its first fixed build, expected bug there, the first fixed build or one at its ABI)
VENDOR_ROW_SIDES: dict[str, tuple[str, str | None, str]] = {
    "Ubuntu 18.04 4.15 generic": ("4.15.0-67-generic", None, "4.15.0-69-generic"),
    "Ubuntu 18.04 4.15 aws": ("4.15.0-1053-aws", None, "4.15.0-1054-aws"),
    "Ubuntu 18.04 4.15 gke": ("4.15.0-1047-gke", None, "4.15.0-1048-gke"),
    "Ubuntu 18.04 4.15 kvm": ("4.15.0-1049-kvm", None, "4.15.0-1050-kvm"),
    "Ubuntu 18.04 4.15 oracle": ("4.15.0-1028-oracle", None, "4.15.0-1029-oracle"),
    "Ubuntu 16.04 4.15 azure": ("4.15.0-1062-azure", None, "4.15.0-1063-azure"),
    "Ubuntu 16.04 4.15 gcp": ("4.15.0-1048-gcp", None, "4.15.0-1049-gcp"),
    "Ubuntu 5.0 generic": ("5.0.0-37-generic", "slice_expiry", "5.0.0-38-generic"),
    "Ubuntu 5.0 aws": ("5.0.0-1022-aws", "slice_expiry", "5.0.0-1023-aws"),
    "Ubuntu 5.0 gke": ("5.0.0-1026-gke", "slice_expiry", "5.0.0-1027-gke"),
    "Ubuntu 5.0 azure": ("5.0.0-1027-azure", "slice_expiry", "5.0.0-1028-azure"),
    "Ubuntu 5.0 gcp": ("5.0.0-1027-gcp", "slice_expiry", "5.0.0-1028-gcp"),
    "Ubuntu 5.0 kvm": ("5.0.0-1023-kvm", "slice_expiry", "5.0.0-1024-kvm"),
    "Ubuntu 5.0 oracle": ("5.0.0-1008-oracle", "slice_expiry", "5.0.0-1009-oracle"),
    "Ubuntu 19.10 5.3 generic": ("5.3.0-23-generic", "slice_expiry", "5.3.0-24-generic"),
    # uname cannot tell eoan from the bionic HWE kernel; ABI 24-25 are fixed through the eoan row.
    "Ubuntu 18.04 HWE 5.3 generic": ("5.3.0-23-generic", "slice_expiry", "5.3.0-26-generic"),
    "RHEL/CentOS 7.7.z": ("3.10.0-1062.4.1.el7.x86_64", "slice_expiry", "3.10.0-1062.9.1.el7.x86_64"),
    "RHEL/CentOS 7.8": ("3.10.0-1062.el7.x86_64", "slice_expiry", "3.10.0-1127.el7.x86_64"),
    "RHEL/CentOS 8.1.z": ("4.18.0-147.0.3.el8_1.x86_64", "slice_expiry", "4.18.0-147.3.1.el8_1.x86_64"),
    "RHEL/CentOS 8.2": ("4.18.0-80.el8.x86_64", "slice_expiry", "4.18.0-193.el8.x86_64"),
    "Amazon Linux 2 4.14": ("4.14.152-127.182.amzn2.x86_64", "slice_expiry", "4.14.154-128.181.amzn2.x86_64"),
    "Oracle UEK5": ("4.14.35-1902.305.4.el7uek.x86_64", "clock_drift", "4.14.35-1902.306.2.el7uek.x86_64"),
    "Photon OS 1.0": ("4.4.227-1.ph1", "clock_drift", "4.4.227-2.ph1"),
    "Bottlerocket": ("4.19.75", "slice_expiry", "5.4.16"),
    "Container Linux 4.19": ("4.19.78-coreos", "slice_expiry", "4.19.84-coreos"),
}


def test_every_vendor_row_with_a_fixed_build_is_tested_on_both_sides() -> None:
    rows_with_fix = {row.line for row in VENDOR_BACKPORTS if row.change == "fix" and row.first_fixed}
    assert rows_with_fix == set(VENDOR_ROW_SIDES)


@pytest.mark.parametrize(("row_line", "sides"), sorted(VENDOR_ROW_SIDES.items()))
def test_vendor_builds_below_the_first_fixed_build_are_affected_and_at_it_fixed(
    row_line: str, sides: tuple[str, str | None, str]
) -> None:
    below, bug, at = sides
    before = kernel_verdict(below)
    after = kernel_verdict(at)
    assert (before.verdict, before.bug) == ("affected", bug), row_line
    assert after.verdict == "fixed", row_line
    assert_well_formed(before)
    assert_well_formed(after)


@pytest.mark.parametrize(
    ("version", "evidence", "confidence"),
    [
        ("4.15.0-67-generic", "USN-4185-1", "high"),
        ("5.0.0-37-generic", "USN-4226-1", "high"),
        ("3.10.0-1062.4.1.el7.x86_64", "Red Hat KB 5285071", "medium"),
        ("4.18.0-193.el8.x86_64", "RHSA-2020:1769", "high"),
        ("4.14.35-1902.305.4.el7uek.x86_64", "ELSA-2020-5845", "high"),
        ("4.4.227-1.ph1", "Photon", "high"),
        ("4.19.78-coreos", "coreos-overlay#3790", "medium"),
    ],
)
def test_vendor_verdicts_name_their_evidence_and_weigh_it(version: str, evidence: str, confidence: str) -> None:
    result = kernel_verdict(version)
    assert evidence in " ".join(result.reasons)
    assert result.confidence == confidence


def test_an_affected_ubuntu_node_is_told_the_ubuntu_build_to_move_to() -> None:
    assert kernel_verdict("4.15.0-67-generic").fixed_in == ("4.15.0-69.78",)


def test_ubuntu_lowlatency_and_lpae_follow_the_generic_row() -> None:
    assert kernel_verdict("4.15.0-67-lowlatency").verdict == "affected"
    assert kernel_verdict("4.15.0-69-generic-lpae").verdict == "fixed"


def test_ubuntu_compares_the_upload_number_when_the_string_shows_it() -> None:
    assert kernel_verdict("4.15.0-69.77-generic").verdict == "affected"
    assert kernel_verdict("4.15.0-69.78-generic").verdict == "fixed"
    assert kernel_verdict("4.15.0-70-generic").verdict == "fixed"


def test_an_equal_ubuntu_abi_is_counted_as_the_first_fixed_build_and_says_so() -> None:
    result = kernel_verdict("4.15.0-69-generic")
    assert result.verdict == "fixed"
    assert "ABI 69" in " ".join(result.reasons)


@pytest.mark.parametrize("version", ["5.3.0-1008-aws", "4.4.0-210-generic", "4.18.0-25-generic"])
def test_ubuntu_kernels_without_a_record_below_the_fix_are_unknown(version: str) -> None:
    result = kernel_verdict(version)
    assert (result.verdict, result.confidence) == ("unknown", "low")
    assert "check with the vendor" in " ".join(result.reasons)


@pytest.mark.parametrize(
    ("version", "verdict"),
    [
        ("3.10.0-957.el7.x86_64", "affected"),  # a 7.6 GA build predates every fixed stream
        ("3.10.0-957.27.2.el7.x86_64", "unknown"),  # a 7.6 EUS z-stream: backports not recorded
        ("3.10.0-1101.el7.x86_64", "unknown"),  # a build between the fixed 7.7.z stream and 7.8 GA
        ("3.10.0-1160.83.1.el7.x86_64", "fixed"),  # 7.9 inherits 7.8's fix
        ("4.18.0-147.el8.x86_64", "affected"),  # 8.1 GA, before 147.3.1
        ("4.18.0-80.11.2.el8_0.x86_64", "unknown"),
        ("4.18.0-372.9.1.el8.x86_64", "fixed"),
        ("5.14.0-284.11.1.el9_2.x86_64", "fixed"),
        ("2.6.32-754.el6.x86_64", "unknown"),
    ],
)
def test_rhel_builds_are_judged_by_their_stream(version: str, verdict: str) -> None:
    assert kernel_verdict(version).verdict == verdict


def test_amazon_linux_2_had_512ac999_from_4_14_97_so_the_bug_changes_there() -> None:
    assert kernel_verdict("4.14.94-89.73.amzn2.x86_64").bug == "clock_drift"
    assert kernel_verdict("4.14.97-90.72.amzn2.x86_64").bug == "slice_expiry"


@pytest.mark.parametrize(
    ("version", "bug"),
    [
        ("3.16.0-11-amd64", "clock_drift"),  # ABI 11 began with 3.16.84-1, after the 3.16.81-1 revert
        ("3.16.0-10-amd64", None),  # ABI 10 covers 3.16.81-1 and earlier uploads: either bug
        ("3.16.0-4-amd64", None),
        ("3.16.81-1+deb8u1", "clock_drift"),  # a Debian package version names the real sublevel
    ],
)
def test_debian_jessie_is_affected_even_after_its_revert(version: str, bug: str | None) -> None:
    result = kernel_verdict(version)
    assert (result.verdict, result.bug) == ("affected", bug)
    assert "DLA-2068-1" in " ".join(result.reasons)


@pytest.mark.parametrize("version", ["4.9.0-11-amd64", "4.9.0-0.bpo.11-amd64", "4.9.189-3+deb9u2"])
def test_debian_stretch_was_never_fixed(version: str) -> None:
    result = kernel_verdict(version)
    assert (result.verdict, result.bug, result.confidence) == ("affected", "clock_drift", "medium")


@pytest.mark.parametrize(
    ("version", "verdict"),
    [
        ("4.19.0-6-amd64", "unknown"),  # Debian's 4.19.0 does not tell the sublevel
        ("4.19.0-17-cloud-amd64", "unknown"),
        ("4.19.67-2+deb10u2", "unknown"),  # sublevel 67 is below 84 and there is no Debian 10 record
        ("4.19.98-1+deb10u1", "fixed"),  # sublevel 98 is past 4.19.84
        ("5.10.0-18-amd64", "fixed"),
    ],
)
def test_debian_10_is_judged_by_the_sublevel_only_when_it_is_visible(version: str, verdict: str) -> None:
    assert kernel_verdict(version).verdict == verdict


@pytest.mark.parametrize(
    ("version", "verdict"),
    [
        ("4.4.86+", "unknown"),  # COS: no record, base below the fix
        ("4.14.127+", "unknown"),
        ("4.14.174+", "fixed"),  # COS names the real sublevel: 174 >= 154
        ("4.19.112+", "fixed"),
        ("4.12.14-122.37-default", "unknown"),  # SUSE 4.12: no record
        ("5.3.18-24.75-default", "fixed"),  # SUSE 15 SP2 starts from 5.3.18 >= 5.3.9
        ("5.3.18-18.47-azure", "fixed"),
        ("4.19.10-talos", "unknown"),  # Talos: no record
        ("5.15.102-talos", "fixed"),
        ("4.19.81-coreos", "unknown"),  # backported onto 4.19.81 in a release not identified
        ("4.19.76-flatcar", "unknown"),
        ("4.9.184-linuxkit", "unknown"),
        ("4.19.128-microsoft-standard", "fixed"),
        ("5.15.153.1-microsoft-standard-WSL2", "fixed"),
        ("4.14.35-1818.3.3.el7uek.x86_64", "affected"),  # an older UEK5 update, before 1902.306.2
        ("4.14.35-2047.510.5.el7uek.x86_64", "fixed"),
        ("4.1.12-124.48.6.el7uek.x86_64", "unknown"),  # UEK4: no record
        ("5.4.17-2136.300.7.el8uek.x86_64", "fixed"),
        ("5.15.125.1-2.cm2", "fixed"),
        ("5.3.7-301.fc31.x86_64", "unknown"),  # Fedora names the real sublevel: 7 < 9, no record
        ("4.14.77-70.59.amzn1.x86_64", "unknown"),  # Amazon Linux 1: no row
        ("4.9.263-1.ph2", "unknown"),  # Photon 2.0: the Photon row is for 1.0
    ],
)
def test_other_vendor_kernels(version: str, verdict: str) -> None:
    result = kernel_verdict(version)
    assert result.verdict == verdict
    assert_well_formed(result)


def test_an_unknown_verdict_never_claims_a_bug_and_points_at_the_probe() -> None:
    result = kernel_verdict("4.14.91+")
    assert (result.bug, result.confidence) == (None, "low")
    assert "kernel_probe" in " ".join(result.reasons)
    assert result.fixed_in == ("4.14.154", "4.19.84", "5.4")


def test_the_vendor_table_holds_every_domain_row_with_its_source() -> None:
    vendors = {row.vendor for row in VENDOR_BACKPORTS}
    assert vendors >= {
        "ubuntu",
        "rhel",
        "amazon_linux_2",
        "oracle_uek",
        "debian",
        "photon",
        "bottlerocket",
        "container_linux",
        "cos",
        "suse",
        "talos",
    }
    for row in VENDOR_BACKPORTS:
        assert row.evidence and row.status in ("confirmed", "reported", "not_found")
        if row.first_fixed:
            assert vendor_build_key(row.first_fixed), row.line


# --- Input that is not a kernel version ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "\n",
        None,
        42,
        b"5.4.0",
        "garbage",
        "linux",
        "5",
        "5.",
        "v5.4.0",
        "5.4.0 (Ubuntu)",
        "5.4.0\x00",
        "٥.٤.٠",  # Arabic-Indic digits
        "５.４.０",  # fullwidth digits
        "5.4.0-généric",
        "x" * 100_000,
        "5." * 5000,
        "99.1.1",
        "1.2.3",
    ],
)
def test_input_that_is_not_a_kernel_version_is_unknown_with_a_reason(value: object) -> None:
    result = kernel_verdict(value)  # the cached wrapper takes any hashable value
    assert result.verdict == "unknown"
    assert result.bug is None
    assert result.confidence == "low"
    assert_well_formed(result)
    assert len(result.version) <= 81, "a huge input is not echoed back in full"


def test_a_windows_node_is_not_judged_as_linux_10() -> None:
    result = kernel_verdict("10.0.17763.1577")
    assert result.verdict == "unknown"
    assert "Windows" in result.reasons[0]


def test_wsl1_has_no_linux_scheduler_to_judge() -> None:
    assert kernel_verdict("4.4.0-19041-Microsoft").verdict == "unknown"


def test_surrounding_whitespace_is_ignored() -> None:
    assert kernel_verdict(" 5.4.0-1018-gke\n").verdict == "fixed"


@settings(max_examples=300)
@given(st.text())
def test_arbitrary_text_never_raises_and_always_gives_one_of_three_verdicts(text: str) -> None:
    assert_well_formed(kernel_verdict(text))


VERSION_SHAPED = st.from_regex(
    r"[0-9]{1,2}\.[0-9]{1,2}(\.[0-9]{1,3})?"
    r"(-[0-9]{1,4}(\.[0-9]{1,3}){0,2}(\.amzn2(023)?|\.el[0-9](_[0-9])?|\.el7uek|\.ph1|-generic|-aws|-gke|-amd64"
    r"|-default|\+deb10u[0-9])?(\.x86_64)?|\+|-flatcar|-coreos|-linuxkit|-talos|-rc[0-9])?",
    fullmatch=True,
)


@settings(max_examples=300)
@given(VERSION_SHAPED)
def test_version_shaped_strings_never_raise(text: str) -> None:
    result = kernel_verdict(text)
    assert_well_formed(result)
    release = parse_kernel_version(text)
    if release is not None and release.line >= (5, 4):
        assert result.verdict == "fixed", "every vendor kernel on a 5.4+ line carries the mainline fix"


# --- Is it a kernel release at all (kernel-check answers 400 when not) ----------------------------------------------


@pytest.mark.parametrize("version", fixture_versions())
def test_every_real_kernel_string_is_a_kernel_release(version: str) -> None:
    assert is_kernel_release(version)


@pytest.mark.parametrize(
    "version",
    ["10.0.17763.1577", "4.4.0-19041-Microsoft", "99.1.1", "1.2.3", "5.4", "6.1.100+", " 5.4.0-1018-gke\n"],
)
def test_release_strings_without_a_known_verdict_are_still_releases(version: str) -> None:
    assert is_kernel_release(version)


@pytest.mark.parametrize(
    "value",
    ["", "   ", "hello", "'; drop", "99999999999999999999.1", "5", "5.", ".5.4", "v5.4.0", "5.4.0 (Ubuntu)",
     "5.4.0\x00", "5.4.0;rm -rf /", "5.4.0-généric", "５.４.０", "5." * 5000, None, 42, b"5.4.0"],
)  # fmt: skip
def test_text_that_is_no_kernel_release_is_told_apart(value: object) -> None:
    assert not is_kernel_release(value)


@settings(max_examples=300)
@given(st.one_of(st.text(), VERSION_SHAPED))
def test_every_string_the_parser_reads_is_a_kernel_release(text: str) -> None:
    if parse_kernel_version(text) is not None:
        assert is_kernel_release(text)


@settings(max_examples=300)
@given(VERSION_SHAPED)
def test_version_shaped_strings_are_kernel_releases(text: str) -> None:
    assert is_kernel_release(text)


# --- Parsing and build comparison ---------------------------------------------------------------------------------


def test_parse_reads_an_amazon_linux_2_release() -> None:
    release = parse_kernel_version("4.14.133-113.105.amzn2.x86_64")
    assert release is not None
    assert (release.major, release.minor, release.patch) == (4, 14, 133)
    assert (release.vendor, release.build, release.sublevel_known) == ("amazon_linux_2", (113, 105), True)
    assert release.raw == "4.14.133-113.105.amzn2.x86_64"


def test_parse_reads_an_ubuntu_abi_and_marks_the_base_as_a_label() -> None:
    release = parse_kernel_version("4.15.0-69-generic")
    assert release is not None
    assert (release.vendor, release.build, release.flavour, release.sublevel_known) == (
        "ubuntu",
        (69,),
        "generic",
        False,
    )


@pytest.mark.parametrize(
    ("version", "vendor", "build", "flavour"),
    [
        ("3.10.0-1062.9.1.el7.x86_64", "rhel", (1062, 9, 1), "el7"),
        ("4.18.0-147.3.1.el8_1.x86_64", "rhel", (147, 3, 1), "el8_1"),
        ("3.10.0-957.rt56.909.el7.x86_64", "rhel", (957,), "rt"),
        ("4.14.35-1902.306.2.el7uek.x86_64", "oracle_uek", (1902, 306, 2), "el7uek"),
        ("6.1.66-91.160.amzn2023.x86_64", "amazon_linux_2023", (91, 160), "amzn2023"),
        ("4.19.0-6-amd64", "debian", (6,), "amd64"),
        ("4.9.0-0.bpo.11-amd64", "debian", (11,), "amd64"),
        ("4.4.86+", "cos", (), ""),
        ("5.0.0-1027-azure", "ubuntu", (1027,), "azure"),
        ("5.3.18-18.47-azure", "suse", (18, 47), "azure"),
        ("4.4.263-1.ph1-esx", "photon", (1,), "ph1"),
        ("5.10.0-custom", "unrecognized", (), "-custom"),
    ],
)
def test_parse_recognises_vendor_forms(version: str, vendor: str, build: tuple[int, ...], flavour: str) -> None:
    release = parse_kernel_version(version)
    assert release is not None
    assert (release.vendor, release.build, release.flavour) == (vendor, build, flavour)


@pytest.mark.parametrize("version", ["", "garbage", "10.0.17763.1577", "99.1.1", "٥.٤.٠", "x" * 200])
def test_parse_returns_none_for_what_is_not_a_linux_release(version: str) -> None:
    assert parse_kernel_version(version) is None


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1062.9.1", "1127", -1),
        ("1062", "1062.9.1", -1),  # a prefix is the older build
        ("4.15.0-69.78", "4.15.0-69.78", 0),
        ("3.10.0-1062.9.1.el7.x86_64", "3.10.0-1062.4.1.el7", 1),  # dist tag and arch are ignored
        ("10", "9", 1),  # numeric, not lexical
        ("4.18.0-147.3.1.el8_1", "4.18.0-147.3.1.el8", 0),
        ((69,), (69, 78), -1),
    ],
)
def test_vendor_builds_compare_numerically(a: str | tuple[int, ...], b: str | tuple[int, ...], expected: int) -> None:
    assert compare_vendor_builds(a, b) == expected


# --- Module shape -------------------------------------------------------------------------------------------------


def test_repeated_versions_are_answered_from_the_cache() -> None:
    first = kernel_verdict("4.14.133-113.105.amzn2.x86_64")
    hits_before = kernel_verdict.cache_info().hits
    assert kernel_verdict("4.14.133-113.105.amzn2.x86_64") is first
    assert kernel_verdict.cache_info().hits == hits_before + 1


def test_kernel_module_imports_no_framework() -> None:
    imported: set[str] = set()
    files = sorted(Path(kernel.__file__).parent.glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "facts.py", "parsing.py", "verdicts.py"}
    nodes = [node for f in files for node in ast.walk(ast.parse(f.read_text(encoding="utf-8")))]
    for node in nodes:
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"django", "rest_framework", "celery", "apps", "cputune"}
