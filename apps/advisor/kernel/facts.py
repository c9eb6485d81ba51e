"""What is known about the CFS slice-expiry bug (docs/domain.md#slice-expiry-bug): the verdict's shape, the upstream
commits and fixed releases, and each vendor's record of its backport (docs/domain.md#vendor-table). Pure Python."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# The kernel's own words; apps.advisor.vocabulary gathers them with the advice's (this package imports nothing of
# the project, so it stays usable on its own).
Verdict = Literal["fixed", "affected", "unknown"]
Bug = Literal["slice_expiry", "clock_drift"]
Confidence = Literal["high", "medium", "low"]


@dataclass(frozen=True, slots=True)
class KernelVerdict:
    version: str
    verdict: Verdict
    bug: Bug | None
    fixed_in: tuple[str, ...]  # versions to move to, e.g. ("5.4", "4.19.84", "4.14.154") or a vendor build
    confidence: Confidence
    reasons: tuple[str, ...]  # sentences naming the commits and the evidence


VendorName = Literal[
    "mainline",
    "amazon_linux_1",
    "amazon_linux_2",
    "amazon_linux_2023",
    "rhel",
    "fedora",
    "oracle_uek",
    "ubuntu",
    "debian",
    "suse",
    "cos",
    "flatcar",
    "container_linux",
    "bottlerocket",
    "photon",
    "linuxkit",
    "talos",
    "wsl",
    "azure_linux",
    "unrecognized",
]

VENDOR_LABELS: dict[str, str] = {
    "mainline": "Mainline/stable Linux",
    "amazon_linux_1": "Amazon Linux 1",
    "amazon_linux_2": "Amazon Linux 2",
    "amazon_linux_2023": "Amazon Linux 2023",
    "rhel": "RHEL/CentOS",
    "fedora": "Fedora",
    "oracle_uek": "Oracle UEK",
    "ubuntu": "Ubuntu",
    "debian": "Debian",
    "suse": "SUSE",
    "cos": "Container-Optimized OS (GKE)",
    "flatcar": "Flatcar Container Linux",
    "container_linux": "CoreOS Container Linux",
    "bottlerocket": "Bottlerocket",
    "photon": "Photon OS",
    "linuxkit": "LinuxKit (Docker Desktop)",
    "talos": "Talos Linux",
    "wsl": "WSL",
    "azure_linux": "Azure Linux (CBL-Mariner)",
    "unrecognized": "This vendor",
}


@dataclass(frozen=True, slots=True)
class KernelRelease:
    """A parsed `uname -r` string. `patch` is the upstream sublevel only when `sublevel_known` is true."""

    major: int
    minor: int
    patch: int
    vendor: VendorName
    build: tuple[
        int, ...
    ]  # vendor build numbers after the base: (113, 105) for 4.14.133-113.105.amzn2, (69,) for Ubuntu ABI 69
    raw: str
    flavour: str = (
        ""  # Ubuntu flavour ("generic", "aws"), Debian arch ("amd64"), RHEL dist tag ("el8_1"), Photon release ("ph1")
    )
    sublevel_known: bool = True  # False where the base is a frozen label: Ubuntu/Debian x.y.0, RHEL, UEK, SUSE

    @property
    def line(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def base(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    @property
    def base_text(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


# --- The upstream facts -----------------------------------------------------------------------------------------

FIX = "de53fd7aedb1 + 763a9ec06c40 (CVE-2019-19922)"
MAINLINE_FIX_LINE = (5, 4)
# First stable release of each line carrying de53fd7aedb1 + 763a9ec06c40 (kernel.org announcements list both).
STABLE_FIX_SUBLEVEL: dict[tuple[int, int], int] = {(4, 14): 154, (4, 19): 84, (5, 3): 9}
# 4.14.95 got 512ac999d275 [weak: AWS support]; 4.18+ has it from mainline.
STABLE_512AC999_SUBLEVEL: dict[tuple[int, int], int] = {(4, 14): 95}
# 3.16.81 reverted 512ac999d275 (Ben Hutchings, 3.16.81-rc1 review: "upstream fix is unsuitable for stable").
REVERT_512AC999_3_16_SUBLEVEL = 81
# Long-term lines a user can move to; 5.3 is left out of cross-line advice because it reached end of life in 2019.
LTS_FIXED_RELEASES: tuple[tuple[tuple[int, int], str], ...] = (((4, 14), "4.14.154"), ((4, 19), "4.19.84"))
ANY_FIXED_RELEASES: tuple[str, ...] = ("4.14.154", "4.19.84", "5.3.9", "5.4")

PROBE_HINT = (
    "Unknown, check with the vendor / run the probe: ask the vendor whether this build carries de53fd7aedb1, "
    "or run `manage.py kernel_probe` on the node."
)


# --- The vendor record -------------------------------------------------------------------------------------------

BackportStatus = Literal["confirmed", "reported", "not_found"]
BackportChange = Literal["fix", "512ac999", "revert_512ac999", "none"]


@dataclass(frozen=True, slots=True)
class VendorBackport:
    """One row of the vendor table: the first build of a vendor line that has `change`.

    `status`: confirmed = the vendor's tracker or advisory says so; reported = issue threads or mirrors; not_found =
    no record, so builds below the upstream fix are unknown. `stream` restricts a row to builds whose first build
    number equals it (a RHEL z-stream such as 1062.x.y); None means the row covers every later build.
    `before` is the bug that builds below `first_fixed` have, when the evidence says which.
    """

    vendor: VendorName
    line: str
    kernel_line: tuple[int, int] | None
    first_fixed: str  # "" when the line was never fixed or no record was found
    evidence: str
    status: BackportStatus
    change: BackportChange = "fix"
    flavours: tuple[str, ...] = ()
    stream: int | None = None
    before: Bug | None = None
    note: str = ""

    @property
    def fixed_key(self) -> tuple[int, ...]:
        """The comparison key of `first_fixed` in the same shape as KernelRelease.build (plus the base where the
        vendor's base is the real sublevel)."""
        key = vendor_build_key(self.first_fixed)
        if self.vendor in _FROZEN_BASE_VENDORS:
            return key[3:]
        return key


_FROZEN_BASE_VENDORS: frozenset[str] = frozenset({"ubuntu", "rhel", "oracle_uek", "suse"})

# Built from one source upload: USN-4185-1 and USN-4226-1 list the same build for all three.
_UBUNTU_GENERIC = ("generic", "generic-lpae", "lowlatency")

VENDOR_BACKPORTS: tuple[VendorBackport, ...] = (
    # Ubuntu. The 4.15 builds are the ones USN-4185-1 (Nov 2019) released; the Ubuntu CVE tracker later named them as
    # the first with CVE-2019-19922. Whether 4.15 builds before them had 512ac999d275 is not recorded: `before` open.
    VendorBackport(vendor="ubuntu", line="Ubuntu 18.04 4.15 generic", kernel_line=(4, 15), first_fixed="4.15.0-69.78",
                   evidence="Ubuntu CVE tracker, USN-4185-1", status="confirmed", flavours=_UBUNTU_GENERIC),
    VendorBackport(vendor="ubuntu", line="Ubuntu 18.04 4.15 aws", kernel_line=(4, 15), first_fixed="4.15.0-1054.56",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=("aws",)),
    VendorBackport(vendor="ubuntu", line="Ubuntu 18.04 4.15 gke", kernel_line=(4, 15), first_fixed="4.15.0-1048.51",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=("gke",)),
    VendorBackport(vendor="ubuntu", line="Ubuntu 18.04 4.15 kvm", kernel_line=(4, 15), first_fixed="4.15.0-1050.50",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=("kvm",)),
    VendorBackport(vendor="ubuntu", line="Ubuntu 18.04 4.15 oracle", kernel_line=(4, 15), first_fixed="4.15.0-1029.32",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=("oracle",)),
    VendorBackport(vendor="ubuntu", line="Ubuntu 16.04 4.15 azure", kernel_line=(4, 15), first_fixed="4.15.0-1063.68",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=("azure",)),
    VendorBackport(vendor="ubuntu", line="Ubuntu 16.04 4.15 gcp", kernel_line=(4, 15), first_fixed="4.15.0-1049.52",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=("gcp",)),
    # Ubuntu 5.0 (19.04, and the 18.04 HWE and cloud kernels): 5.0 has 512ac999d275 from mainline v4.18.
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 generic", kernel_line=(5, 0), first_fixed="5.0.0-38.41",
                   evidence="USN-4226-1", status="confirmed", flavours=_UBUNTU_GENERIC, before="slice_expiry"),
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 aws", kernel_line=(5, 0), first_fixed="5.0.0-1023.26",
                   evidence="USN-4226-1", status="confirmed", flavours=("aws",), before="slice_expiry"),
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 gke", kernel_line=(5, 0), first_fixed="5.0.0-1027.28",
                   evidence="USN-4226-1", status="confirmed", flavours=("gke",), before="slice_expiry"),
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 azure", kernel_line=(5, 0), first_fixed="5.0.0-1028.30",
                   evidence="USN-4226-1", status="confirmed", flavours=("azure",), before="slice_expiry",
                   note="Some summaries list 1027.29, but USN-4226-1 itself lists linux-image-5.0.0-1028-azure "
                        "5.0.0-1028.30; the later build is used so that nothing is called fixed on a guess."),
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 gcp", kernel_line=(5, 0), first_fixed="5.0.0-1028.29",
                   evidence="USN-4226-1", status="confirmed", flavours=("gcp",), before="slice_expiry"),
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 kvm", kernel_line=(5, 0), first_fixed="5.0.0-1024.26",
                   evidence="USN-4226-1", status="confirmed", flavours=("kvm",), before="slice_expiry",
                   note="Taken from the same advisory (USN-4226-1)."),
    VendorBackport(vendor="ubuntu", line="Ubuntu 5.0 oracle", kernel_line=(5, 0), first_fixed="5.0.0-1009.14",
                   evidence="USN-4226-1", status="confirmed", flavours=("oracle",), before="slice_expiry",
                   note="Taken from the same advisory (USN-4226-1)."),
    VendorBackport(vendor="ubuntu", line="Ubuntu 19.10 5.3 generic", kernel_line=(5, 3), first_fixed="5.3.0-24.26",
                   evidence="Ubuntu CVE tracker", status="confirmed", flavours=_UBUNTU_GENERIC, before="slice_expiry"),
    VendorBackport(vendor="ubuntu", line="Ubuntu 18.04 HWE 5.3 generic", kernel_line=(5, 3),
                   first_fixed="5.3.0-26.28~18.04.1", evidence="Ubuntu CVE tracker", status="confirmed",
                   flavours=_UBUNTU_GENERIC, before="slice_expiry"),
    # RHEL/CentOS: RHEL 7's 3.10 predates 51f2176d74ac and RHEL 8's 4.18 has 512ac999d275, so both expire slices.
    VendorBackport(vendor="rhel", line="RHEL/CentOS 7.7.z", kernel_line=(3, 10), first_fixed="3.10.0-1062.9.1.el7",
                   evidence="Red Hat KB 5285071, RHSA-2019:4106", status="reported", stream=1062,
                   before="slice_expiry"),
    VendorBackport(vendor="rhel", line="RHEL/CentOS 7.8", kernel_line=(3, 10), first_fixed="3.10.0-1127.el7",
                   evidence="Red Hat KB 5285071", status="reported", before="slice_expiry"),
    VendorBackport(vendor="rhel", line="RHEL/CentOS 8.1.z", kernel_line=(4, 18), first_fixed="4.18.0-147.3.1.el8_1",
                   evidence="Red Hat KB 5285071", status="reported", stream=147, before="slice_expiry"),
    VendorBackport(vendor="rhel", line="RHEL/CentOS 8.2", kernel_line=(4, 18), first_fixed="4.18.0-193.el8",
                   evidence="RHSA-2020:1769, the first advisory to name CVE-2019-19922", status="confirmed",
                   before="slice_expiry"),
    # Amazon Linux 2 names the real 4.14 sublevel, so 4.14.154 and later are fixed by arithmetic anyway.
    VendorBackport(vendor="amazon_linux_2", line="Amazon Linux 2 4.14", kernel_line=(4, 14),
                   first_fixed="4.14.154-128.181.amzn2",
                   evidence="amazon-eks-ami#372, aws/containers-roadmap#175, EKS AMI v20191213", status="reported",
                   before="slice_expiry"),
    VendorBackport(vendor="amazon_linux_2", line="Amazon Linux 2 4.14 (512ac999d275)", kernel_line=(4, 14),
                   first_fixed="4.14.97-90.72.amzn2", evidence="amazon-eks-ami#372, aws/containers-roadmap#175",
                   status="reported", change="512ac999", before="clock_drift"),
    # ELSA-2020-5845 adds 512ac999d275, de53fd7aedb1 and a throttle_list fix in one update: earlier UEK5 had neither.
    VendorBackport(vendor="oracle_uek", line="Oracle UEK5", kernel_line=(4, 14), first_fixed="4.14.35-1902.306.2.el7uek",
                   evidence="ELSA-2020-5845", status="confirmed", before="clock_drift"),
    VendorBackport(vendor="debian", line="Debian 8 jessie 3.16", kernel_line=(3, 16), first_fixed="3.16.81-1",
                   evidence="DLA-2068-1", status="confirmed", change="revert_512ac999",
                   note="A revert, not the fix: 3.16.81 has no slice expiry but has the clock drift bug again."),
    VendorBackport(vendor="debian", line="Debian 9 stretch 4.9", kernel_line=(4, 9), first_fixed="",
                   evidence="not in DSA-4698-1 / DLA-2114-1", status="reported", change="none",
                   before="clock_drift"),
    # Photon 1.0's linux spec applies 512ac999d275 and de53fd7aedb1 together at 4.4.227-2 ("Fix for CVE-2019-19922").
    VendorBackport(vendor="photon", line="Photon OS 1.0", kernel_line=(4, 4), first_fixed="4.4.227-2",
                   evidence="Photon linux spec changelog", status="confirmed", flavours=("ph1",),
                   before="clock_drift"),
    VendorBackport(vendor="bottlerocket", line="Bottlerocket", kernel_line=(5, 4), first_fixed="5.4.16",
                   evidence="Bottlerocket release notes: v0.3.0, earlier previews ran 4.19.75", status="confirmed",
                   note="Bottlerocket reports a plain upstream version, so upstream arithmetic gives the same answer."),
    VendorBackport(vendor="container_linux", line="Container Linux 4.19", kernel_line=(4, 19), first_fixed="4.19.81",
                   evidence="coreos/coreos-overlay#3790, #3796, #3808", status="reported", before="slice_expiry",
                   note="Backported onto 4.19.81 in November 2019; the first Container Linux release shipping it "
                        "was not found."),
    VendorBackport(vendor="cos", line="COS / GKE", kernel_line=None, first_fixed="", evidence="no record found",
                   status="not_found"),
    VendorBackport(vendor="suse", line="SUSE 4.12", kernel_line=(4, 12), first_fixed="", evidence="no record found",
                   status="not_found"),
    VendorBackport(vendor="talos", line="Talos", kernel_line=None, first_fixed="", evidence="no record found",
                   status="not_found"),
)  # fmt: skip


def vendor_build_key(build: str) -> tuple[int, ...]:
    """The digit groups of a version or vendor build, with dist tag, `~` suffix and architecture dropped.

    '3.10.0-1062.9.1.el7.x86_64' -> (3, 10, 0, 1062, 9, 1); '4.15.0-69.78' -> (4, 15, 0, 69, 78). Purely numeric:
    letters are ignored, so 'rt56' counts as 56.
    """
    head = re.split(r"\.el[0-9]|\.amzn|\.ph[0-9]|\.fc[0-9]|\.cm[0-9]|\.azl[0-9]|~", build, maxsplit=1)[0]
    return tuple(int(group) for group in re.findall(r"[0-9]+", head, flags=re.ASCII))


def compare_vendor_builds(a: str | tuple[int, ...], b: str | tuple[int, ...]) -> int:
    """-1, 0 or 1 as build `a` is older than, the same as, or newer than build `b`.

    Compares digit groups left to right (RPM/dpkg style for numeric builds); a build that is a prefix of the other is
    older: 1062 < 1062.9.1. Strings go through vendor_build_key first.
    """
    key_a = vendor_build_key(a) if isinstance(a, str) else a
    key_b = vendor_build_key(b) if isinstance(b, str) else b
    return (key_a > key_b) - (key_a < key_b)
