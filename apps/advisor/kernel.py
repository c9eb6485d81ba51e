"""Kernel verdicts for the CFS per-CPU slice expiry bug. Pure Python: no Django import.

The bug: CFS bandwidth control hands quota to each CPU in slices; on affected kernels the unused
remainder of a slice expires at the period end, so a many-core node strands up to 1 ms of quota per CPU per
period and throttles containers far below their limit. The commits that matter:

- 51f2176d74ac (v3.16) changed the expiry check so that slices in effect never expired, but it misfires on clock
  drift: a cgroup can be throttled while using little CPU (the "clock drift" bug).
- 512ac999d275 (v4.18, stable 4.14.95) fixed the clock drift condition and so made expiry work again, which
  exposed the stranded-slice problem (the "slice expiry" bug). Before 51f2176d74ac (v3.2 to v3.15) slices expired
  as originally designed, which is the same slice expiry behaviour.
- de53fd7aedb1 with its companion 763a9ec06c40 (CVE-2019-19922) is the fix: slices no longer expire. Mainline
  v5.4; stable 5.3.9, 4.19.84, 4.14.154. The 4.4.y and 4.9.y lines never got it; 3.16.81 reverted 512ac999d275
  instead, which removes slice expiry but brings the clock drift bug back.

Reading a `uname -r` string (a node's `status.nodeInfo.kernelVersion`):

- Mainline and stable strings (`5.4.0`, `4.19.84`) are plain arithmetic on the version.
- Stable-tracking vendors put the real upstream sublevel in the version: Amazon Linux (`4.14.133-113.105.amzn2`),
  COS (`4.14.56+`), Flatcar and Container Linux, Photon, linuxkit, Talos, WSL 2, Fedora, Azure Linux, Debian
  package versions (`4.19.67-2+deb10u2`). Every vendor kernel contains at least the upstream release it names, so
  a base at or past the fix means fixed (vendors rebase on stable).
- Ubuntu (`4.15.0-69-generic`), Debian (`4.19.0-6-amd64`), RHEL (`3.10.0-1127.el7`), Oracle UEK
  (`4.14.35-1902.306.2.el7uek`) and SUSE (`4.12.14-122.37-default`) keep a frozen base: `4.15.0` says nothing about
  which stable fixes went in. Only the vendor build number and the vendor's own record (VENDOR_BACKPORTS) decide.
- A vendor kernel whose base is below the fix and whose vendor has no record is "unknown": check with the vendor or
  run the kernel probe. It is never guessed fixed.

Ubuntu's uname shows the ABI number (69 in `4.15.0-69-generic`) but not the upload number (the 78 of the package
version 4.15.0-69.78). Builds are compared on the ABI when only the ABI is visible: an ABI above the first fixed
build's ABI is fixed, below it is not, and an equal ABI counts as that first fixed build, because Ubuntu publishes
one upload per ABI to its updates pocket (USN-4185-1 lists exactly 4.15.0-69.78 for ABI 69). When the upload is
visible (`4.15.0-69.78-generic`) the full build is compared.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

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


# --- Parsing -----------------------------------------------------------------------------------------------------

# `uname -r` is at most 64 characters (__NEW_UTS_LEN); anything much longer is not a kernel release.
MAX_RELEASE_CHARS = 128
_SHOWN_CHARS = 80

_BASE = r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9]{1,3})\.(?P<patch>[0-9]{1,6})"
_ARCH = r"(?:\.(?:x86_64|aarch64|arm64|i686|i386|ppc64le|ppc64|s390x|armv7hl))?"
_DEBIAN_ARCH = (
    r"(?:cloud-|rt-)?(?:amd64|arm64|armmp|armmp-lpae|686|686-pae|i386|powerpc64le|ppc64el|s390x|"
    r"mips64r2el|mips32r2el|octeon|loongson-3|marvell|rpi|4kc-malta|5kc-malta|riscv64)"
)
_SUSE_FLAVOURS = r"(?:default|azure|preempt|rt|kvmsmall|64kb|ec2|xen|vanilla|pae|lpae)"
_WINDOWS = re.compile(r"10\.0\.[0-9]{5}(?:\.[0-9]+)?", re.ASCII)
_WSL1 = re.compile(r"4\.4\.0-[0-9]+-Microsoft", re.ASCII)

_Builder = Callable[["re.Match[str]", str], KernelRelease]


def _ints(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    parts: list[int] = []
    for part in text.split("."):
        if not part.isdigit():
            break  # RHEL real-time builds: 957.rt56.909 -> (957,)
        parts.append(int(part))
    return tuple(parts)


def _release(
    m: re.Match[str],
    raw: str,
    vendor: VendorName,
    build: tuple[int, ...] = (),
    flavour: str = "",
    sublevel_known: bool = True,
) -> KernelRelease:
    patch = m.groupdict().get("patch")
    return KernelRelease(
        major=int(m["major"]),
        minor=int(m["minor"]),
        patch=int(patch) if patch else 0,
        vendor=vendor,
        build=build,
        raw=raw,
        flavour=flavour,
        sublevel_known=sublevel_known,
    )


def _parse_amazon(m: re.Match[str], raw: str) -> KernelRelease:
    vendor: VendorName = "amazon_linux_2023"
    if m["dist"] == "1":
        vendor = "amazon_linux_1"
    elif m["dist"] == "2":
        vendor = "amazon_linux_2"
    return _release(m, raw, vendor, _ints(m["build"]), f"amzn{m['dist']}")


def _parse_uek(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "oracle_uek", _ints(m["build"]), f"el{m['el']}uek", sublevel_known=False)


def _parse_rhel(m: re.Match[str], raw: str) -> KernelRelease:
    dist = f"el{m['el']}" + (f"_{m['elminor']}" if m["elminor"] else "")
    flavour = "rt" if ".rt" in m["build"] else dist
    return _release(m, raw, "rhel", _ints(m["build"]), flavour, sublevel_known=False)


def _parse_fedora(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "fedora", _ints(m["build"]), f"fc{m['fc']}")


def _parse_azure_linux(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "azure_linux", _ints(m["build"]), m["dist"])


def _parse_photon(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "photon", (int(m["build"]),), f"ph{m['ph']}")


def _parse_debian_uname(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "debian", (int(m["abi"]),), m["flavour"], sublevel_known=False)


def _parse_debian_package(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "debian", tuple(int(g) for g in re.findall(r"[0-9]+", m["rev"] + m["tag"])), "package")


def _parse_ubuntu(m: re.Match[str], raw: str) -> KernelRelease:
    build = (int(m["abi"]),) + ((int(m["upload"]),) if m["upload"] else ())
    return _release(m, raw, "ubuntu", build, m["flavour"], sublevel_known=False)


def _parse_suse(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "suse", _ints(m["build"]), m["flavour"], sublevel_known=False)


def _parse_container_linux(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "container_linux", _ints(m["r"]), "coreos")


def _parse_plain(vendor: VendorName, flavour: str = "") -> _Builder:
    def build(m: re.Match[str], raw: str) -> KernelRelease:
        return _release(m, raw, vendor, (), flavour)

    return build


def _parse_unrecognized(m: re.Match[str], raw: str) -> KernelRelease:
    return _release(m, raw, "unrecognized", (), m["suffix"])


# First match wins; vendor markers before the generic shapes.
_PARSERS: tuple[tuple[re.Pattern[str], _Builder], ...] = tuple(
    (re.compile(pattern, re.ASCII), builder)
    for pattern, builder in (
        (_BASE + r"-(?P<build>[0-9]+(?:\.[0-9]+)*)\.amzn(?P<dist>1|2|2023)" + _ARCH, _parse_amazon),
        (_BASE + r"-(?P<build>[0-9]+(?:\.[0-9]+)*)\.el(?P<el>[0-9]+)uek" + _ARCH, _parse_uek),
        (
            _BASE
            + r"-(?P<build>[0-9][0-9A-Za-z._]*?)\.el(?P<el>[0-9]+)(?:_(?P<elminor>[0-9]+))?(?:\.[A-Za-z0-9_.+]+)?",
            _parse_rhel,
        ),
        (_BASE + r"-(?P<build>[0-9]+(?:\.[0-9]+)*)\.fc(?P<fc>[0-9]+)" + _ARCH, _parse_fedora),
        (
            _BASE + r"(?:\.[0-9]+)?-(?P<build>[0-9]+(?:\.[0-9]+)*)\.(?P<dist>cm[0-9]|azl[0-9])" + _ARCH,
            _parse_azure_linux,
        ),
        (_BASE + r"-(?P<build>[0-9]+)\.ph(?P<ph>[0-9]+)(?:-[a-z0-9]+)?", _parse_photon),
        (
            r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9]{1,3})\.0-(?:0\.bpo\.)?(?P<abi>[0-9]+)-(?P<flavour>"
            + _DEBIAN_ARCH
            + ")",
            _parse_debian_uname,
        ),
        (
            _BASE + r"-(?P<rev>[0-9]+)(?P<tag>\+deb[0-9]+u[0-9]+(?:~bpo[0-9]+\+[0-9]+)?|~bpo[0-9]+\+[0-9]+)",
            _parse_debian_package,
        ),
        (
            r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9]{1,3})\.0-(?P<abi>[0-9]+)(?:\.(?P<upload>[0-9]+))?(?:~[0-9.]+)?"
            r"-(?P<flavour>(?!default$|preempt$|kvmsmall$|64kb$|vanilla$)[a-z][a-z0-9]*(?:-[a-z0-9]+)*)",
            _parse_ubuntu,
        ),
        # After Ubuntu: SUSE also has an -azure flavour, but with a dotted release (5.3.18-18.47-azure).
        (_BASE + r"-(?P<build>[0-9]+(?:\.[0-9]+)*)-(?P<flavour>" + _SUSE_FLAVOURS + ")", _parse_suse),
        (_BASE + r"\+", _parse_plain("cos")),
        (_BASE + r"-flatcar", _parse_plain("flatcar")),
        (_BASE + r"-coreos(?:-r(?P<r>[0-9]+))?", _parse_container_linux),
        (_BASE + r"-linuxkit(?:-aarch64)?", _parse_plain("linuxkit")),
        (_BASE + r"-talos", _parse_plain("talos")),
        (_BASE + r"(?:\.[0-9]+)?-microsoft-standard(?:-WSL2)?\+?", _parse_plain("wsl", "wsl2")),
        (
            r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9]{1,3})(?:\.(?P<patch>[0-9]{1,6}))?(?:-rc[0-9]+)?",
            _parse_plain("mainline"),
        ),
        (_BASE + r"(?P<suffix>[-.+_~][A-Za-z0-9._+~-]*)", _parse_unrecognized),
    )
)


# The least a `uname -r` string is: MAJOR.MINOR first, then only the characters kernel releases use. Three digits
# at most per number: real majors are 2 to 6, Windows nodes report 10.
_RELEASE_SHAPE = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}(?:[-.+_~][A-Za-z0-9._+~-]*)?", re.ASCII)


def is_kernel_release(version: object) -> bool:
    """Whether `version` reads as a kernel release at all, known or not: "5.4.0-1018-gke", "99.1.1" or a Windows
    node's "10.0.17763.1577" do; "hello", "v5.4.0", "5.4.0 (Ubuntu)" or a 20-digit major do not.

    Looser than parse_kernel_version, which also knows each vendor's shape: every string it parses passes here.
    Surrounding whitespace is ignored, as kernel_verdict ignores it.
    """
    if not isinstance(version, str):
        return False
    text = version.strip()
    return len(text) <= MAX_RELEASE_CHARS and _RELEASE_SHAPE.fullmatch(text) is not None


def parse_kernel_version(version: str) -> KernelRelease | None:
    """Parse a `uname -r` string (a node's kernelVersion) into a KernelRelease, or None when it is not one.

    None for empty, non-ASCII, overlong (> 128 chars) or non-Linux strings (a Windows node's `10.0.17763.1577`),
    and for majors above 9 or below 2. Surrounding whitespace is ignored.
    """
    if not isinstance(version, str):
        return None
    text = version.strip()
    if not text or len(text) > MAX_RELEASE_CHARS or not text.isascii() or _WINDOWS.fullmatch(text):
        return None
    if _WSL1.fullmatch(text):
        m = re.match(_BASE, text, re.ASCII)
        assert m is not None  # _WSL1 guarantees the base
        return _release(m, text, "wsl", (), "wsl1", sublevel_known=False)
    for pattern, builder in _PARSERS:
        match = pattern.fullmatch(text)
        if match:
            release = builder(match, text)
            # Linux went from 2.6 to 3.0 in 2011 and reaches 7.x around 2026: outside 2..9 it is not a Linux release.
            if not 2 <= release.major <= 9:
                return None
            return release
    return None


# --- Verdicts ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Finding:
    verdict: Verdict
    bug: Bug | None
    confidence: Confidence
    reasons: tuple[str, ...]
    fixed_in: tuple[str, ...] = ()


def _upstream_targets(line: tuple[int, int]) -> tuple[str, ...]:
    """Versions to move to from an upstream line: its own fixed stable if any, newer fixed LTS lines, then 5.4."""
    targets: list[str] = []
    own = STABLE_FIX_SUBLEVEL.get(line)
    if own is not None:
        targets.append(f"{line[0]}.{line[1]}.{own}")
    targets.extend(release for lts_line, release in LTS_FIXED_RELEASES if lts_line > line)
    targets.append("5.4")
    return tuple(targets)


def _stable_fix_sentence(line: tuple[int, int]) -> str:
    own = STABLE_FIX_SUBLEVEL.get(line)
    if own is None:
        return (
            f"The {line[0]}.{line[1]} line never received the fix {FIX}; it is in mainline v5.4 and in stable "
            "5.3.9, 4.19.84 and 4.14.154."
        )
    return (
        f"The fix {FIX} reached {line[0]}.{line[1]}.y in {line[0]}.{line[1]}.{own} "
        "(the kernel.org stable announcement lists both commits)."
    )


_SLICE_EXPIRY_EFFECT = (
    "unused per-CPU quota slices expire at each period end, so a many-core node strands up to 1 ms of quota per CPU "
    "per period and throttles containers far below their limit"
)
_CLOCK_DRIFT_EFFECT = (
    "the expiry check that 51f2176d74ac added in v3.16 misfires after the period timer is re-armed, so a cgroup is "
    'throttled while using little CPU, which 512ac999d275 ("Fix bandwidth timer clock drift condition") fixed'
)


def _upstream(release: KernelRelease) -> _Finding:
    """The state of the upstream release `release.base` (mainline and kernel.org stable only)."""
    line, version = release.line, release.base_text
    if line >= MAINLINE_FIX_LINE:
        return _Finding(
            "fixed",
            None,
            "high",
            (
                f"Linux {version} is at or past v5.4, the first mainline release with the fix {FIX}: per-CPU quota "
                "slices no longer expire, and over-use is bounded by about 1 ms per CPU per period.",
            ),
        )
    own_fix = STABLE_FIX_SUBLEVEL.get(line)
    if own_fix is not None and release.patch >= own_fix:
        return _Finding(
            "fixed",
            None,
            "high",
            (
                f"Linux {version} is at or past {line[0]}.{line[1]}.{own_fix}, the first {line[0]}.{line[1]}.y stable "
                f"release with the fix {FIX} (the kernel.org stable announcement lists both commits).",
            ),
        )
    targets = _upstream_targets(line)
    if line < (3, 2):
        return _Finding(
            "unknown",
            None,
            "low",
            (
                f"CFS bandwidth control (cpu.cfs_quota_us) entered mainline in v3.2, so a {version} kernel can only "
                "have it as a vendor backport of unknown vintage.",
                PROBE_HINT,
            ),
            targets,
        )
    if line < (3, 16):
        return _Finding(
            "affected",
            "slice_expiry",
            "medium",
            (
                f"Linux {version} predates 51f2176d74ac (v3.16): per-CPU slices still expire as first designed "
                f"(a9cf55b28610, v3.2), so {_SLICE_EXPIRY_EFFECT}.",
                "This follows from the fix's own commit message (de53fd7aedb1 says slices stopped expiring only from "
                "51f2176d74ac on), not from a test on this kernel; RHEL 7's 3.10 needed the fix too (Red Hat KB 5285071).",
                _stable_fix_sentence(line),
            ),
            targets,
        )
    if line == (3, 16):
        return _three_sixteen(release.patch, version, targets)
    exposer = STABLE_512AC999_SUBLEVEL.get(line)
    if line >= (4, 18) or (exposer is not None and release.patch >= exposer):
        source = (
            "512ac999d275 (mainline v4.18)"
            if line >= (4, 18)
            else f"512ac999d275, which reached 4.14.y in 4.14.{exposer} (reported by AWS support)"
        )
        return _Finding(
            "affected",
            "slice_expiry",
            "high",
            (f"Linux {version} has {source} but not the fix: {_SLICE_EXPIRY_EFFECT}.", _stable_fix_sentence(line)),
            targets,
        )
    reasons = [f"Linux {version} has neither 512ac999d275 nor the fix {FIX}: {_CLOCK_DRIFT_EFFECT}."]
    if line in ((4, 4), (4, 9)):
        reasons.append("The 4.4.y and 4.9.y stable lines never received either commit.")
    elif exposer is not None:
        reasons.append(
            f"512ac999d275 reached 4.14.y in 4.14.{exposer} (reported by AWS support); from there to 4.14.153 the "
            "slice expiry bug applies instead."
        )
    reasons.append(_stable_fix_sentence(line))
    return _Finding("affected", "clock_drift", "high", tuple(reasons), targets)


def _three_sixteen(patch: int, version: str, targets: tuple[str, ...]) -> _Finding:
    never = f"The 3.16 line never received the fix {FIX}."
    if patch == 0:
        first = f"Linux {version} is the v3.16 release itself, with 51f2176d74ac and without 512ac999d275"
    elif patch >= REVERT_512AC999_3_16_SUBLEVEL:
        first = (
            f"Linux {version} is at or past 3.16.81, which reverted the 3.16.y backport of 512ac999d275 after a "
            "regression: that removes slice expiry but restores the clock drift bug"
        )
    else:
        return _Finding(
            "affected",
            None,
            "high",
            (
                f"Linux {version} is affected either way: 512ac999d275 was backported to 3.16.y in a release before "
                "3.16.81 (which one is not recorded here), so earlier 3.16.y releases have the clock drift bug and "
                "later ones the slice expiry bug.",
                never,
            ),
            targets,
        )
    return _Finding("affected", "clock_drift", "high", (f"{first}: {_CLOCK_DRIFT_EFFECT}.", never), targets)


_CONFIDENCE_BY_STATUS: dict[BackportStatus, Confidence] = {
    "confirmed": "high",
    "reported": "medium",
    "not_found": "low",
}
_CONFIDENCE_ORDER: tuple[Confidence, ...] = ("low", "medium", "high")


def _status_confidence(status: BackportStatus) -> Confidence:
    return _CONFIDENCE_BY_STATUS[status]


def _evidence(row: VendorBackport) -> str:
    return f"{row.evidence} ({row.status.replace('_', ' ')})"


def _rows(vendor: VendorName, line: tuple[int, int], flavour: str | None = None) -> list[VendorBackport]:
    return [
        row
        for row in VENDOR_BACKPORTS
        if row.vendor == vendor
        and row.kernel_line == line
        and (flavour is None or not row.flavours or flavour in row.flavours)
    ]


def _vendor_fixed(release: KernelRelease, row: VendorBackport, extra: str = "") -> _Finding:
    label = VENDOR_LABELS[release.vendor]
    reasons = [
        f"{label} build {release.raw} is at or past {row.first_fixed}, the first {row.line} build with the fix {FIX}, "
        f"according to {_evidence(row)}.",
    ]
    if extra:
        reasons.append(extra)
    return _Finding("fixed", None, _status_confidence(row.status), tuple(reasons))


def _vendor_affected(
    release: KernelRelease, fixed_rows: list[VendorBackport], bug: Bug | None, extra: str = ""
) -> _Finding:
    label = VENDOR_LABELS[release.vendor]
    first = fixed_rows[0]
    firsts = " or ".join(row.first_fixed for row in fixed_rows)
    reasons = [
        f"{label} build {release.raw} is older than {firsts}, the first {first.line} build with the fix {FIX}, "
        f"according to {' and '.join(_evidence(row) for row in fixed_rows)}.",
    ]
    if bug == "slice_expiry":
        reasons.append(f"Builds before it have 512ac999d275 without the fix: {_SLICE_EXPIRY_EFFECT}.")
    elif bug == "clock_drift":
        reasons.append(f"Builds before it have neither 512ac999d275 nor the fix: {_CLOCK_DRIFT_EFFECT}.")
    else:
        reasons.append(
            "Whether builds before it carried 512ac999d275 is not recorded, so it has either the slice expiry or the "
            "clock drift bug; both throttle containers that use little CPU."
        )
    if extra:
        reasons.append(extra)
    confidence = min((_status_confidence(row.status) for row in fixed_rows), key=_CONFIDENCE_ORDER.index)
    return _Finding("affected", bug, confidence, tuple(reasons), tuple(row.first_fixed for row in fixed_rows))


def _frozen_base_sentence(release: KernelRelease) -> str:
    return (
        f"{VENDOR_LABELS[release.vendor]}'s {release.base_text} is a frozen label, not the stable sublevel, so only "
        "the vendor build number tells which fixes went in."
    )


def _ubuntu(release: KernelRelease) -> _Finding | None:
    rows = [row for row in _rows("ubuntu", release.line, release.flavour) if row.change == "fix"]
    if not rows:
        return None
    abi_only = len(release.build) == 1
    for row in rows:
        if release.build >= row.fixed_key[: len(release.build)]:
            extra = _frozen_base_sentence(release)
            if abi_only and release.build[0] == row.fixed_key[0]:
                extra += (
                    f" The uname shows ABI {release.build[0]} but not the upload number; Ubuntu publishes one upload per "
                    f"ABI, so ABI {release.build[0]} is counted as {row.first_fixed}."
                )
            return _vendor_fixed(release, row, extra)
    before = rows[0].before
    return _vendor_affected(release, rows, before, _frozen_base_sentence(release))


def _rhel(release: KernelRelease) -> _Finding | None:
    rows = [row for row in _rows("rhel", release.line) if row.change == "fix"]
    if not rows or not release.build:
        return None
    key = release.build
    extra = _frozen_base_sentence(release)
    for row in rows:
        if row.stream is None and key >= row.fixed_key:
            return _vendor_fixed(release, row, extra + " Later minor releases inherit the fix.")
    for row in rows:
        if row.stream is not None and key[0] == row.stream:
            if key >= row.fixed_key:
                return _vendor_fixed(release, row, extra)
            return _vendor_affected(release, [row], row.before, extra)
    oldest_stream = min(row.fixed_key[0] for row in rows)
    fixed_in = tuple(row.first_fixed for row in rows)
    if key[0] < oldest_stream and len(key) == 1:
        # A minor-release (GA) build older than every fixed stream was built before any of them had the fix.
        return _vendor_affected(
            release,
            rows,
            rows[0].before,
            extra + f" Build {key[0]} is a minor-release build older than every fixed stream.",
        )
    where = (
        "a z-stream (EUS/AUS) update of an older minor release, whose backports are not recorded here"
        if key[0] < oldest_stream
        else "a pre-release build between the fixed z-stream and the fixed minor release"
    )
    return _Finding(
        "unknown",
        None,
        "low",
        (f"{VENDOR_LABELS['rhel']} build {release.raw} is {where}.", extra, PROBE_HINT),
        fixed_in,
    )


def _amazon_linux_2(release: KernelRelease) -> _Finding | None:
    rows = _rows("amazon_linux_2", release.line)
    fix_rows = [row for row in rows if row.change == "fix"]
    if not fix_rows:
        return None
    key = release.base + release.build
    exposer_rows = [row for row in rows if row.change == "512ac999"]
    has_512 = any(key >= row.fixed_key for row in exposer_rows)
    exposer_note = (
        f"Amazon Linux 2 carried 512ac999d275 from {exposer_rows[0].first_fixed}, according to "
        f"{_evidence(exposer_rows[0])}."
        if exposer_rows
        else ""
    )
    return _vendor_affected(release, fix_rows, "slice_expiry" if has_512 else "clock_drift", exposer_note)


def _oracle_uek(release: KernelRelease) -> _Finding | None:
    rows = [row for row in _rows("oracle_uek", release.line) if row.change == "fix"]
    if not rows:
        return None
    row = rows[0]
    extra = _frozen_base_sentence(release)
    if release.build >= row.fixed_key:
        return _vendor_fixed(release, row, extra)
    return _vendor_affected(
        release, rows, row.before, extra + " ELSA-2020-5845 added 512ac999d275 and the fix in the same update."
    )


def _photon(release: KernelRelease) -> _Finding | None:
    rows = [row for row in _rows("photon", release.line, release.flavour) if row.change == "fix"]
    if not rows:
        return None
    row = rows[0]
    if release.base + release.build >= row.fixed_key:
        return _vendor_fixed(release, row)
    return _vendor_affected(
        release, rows, row.before, "Photon applied 512ac999d275 and the fix together in that build."
    )


# Debian jessie's ABI 3.16.0-10 covers 3.16.81-1 (the DLA-2068-1 package check lists linux-headers-3.16.0-10 at
# 3.16.81-1) and also some earlier uploads; ABI 11 started with 3.16.84-1. So only ABI 11 and later are certainly
# past the revert.
_DEBIAN_JESSIE_FIRST_ABI_PAST_REVERT = 11


def _debian(release: KernelRelease) -> _Finding | None:
    rows = _rows("debian", release.line)
    if not rows:
        return None
    row = rows[0]
    targets = _upstream_targets(release.line)
    if row.change == "none":  # stretch 4.9: never fixed
        return _Finding(
            "affected",
            row.before,
            _status_confidence(row.status),
            (
                f"Debian build {release.raw} is on the {row.line} line, which never received the fix {FIX}: "
                f"it is {_evidence(row)}.",
                f"Upstream 4.9.y has neither 512ac999d275 nor the fix: {_CLOCK_DRIFT_EFFECT}.",
            ),
            targets,
        )
    # jessie 3.16: every state of 3.16 is affected; the package version or the ABI tells which bug.
    if release.flavour == "package":
        finding = _upstream(release)
        extra = f"Debian's {row.first_fixed} reverted 512ac999d275 rather than backport the fix: {_evidence(row)}."
        return _Finding(finding.verdict, finding.bug, finding.confidence, (*finding.reasons, extra), targets)
    past_revert = release.build[0] >= _DEBIAN_JESSIE_FIRST_ABI_PAST_REVERT
    reasons = [
        f"Debian build {release.raw} is on the {row.line} line, which never received the fix {FIX}.",
        f"Debian's {row.first_fixed}, {_evidence(row)}, reverted 512ac999d275 instead: that removes slice expiry but "
        f"restores the clock drift bug: {_CLOCK_DRIFT_EFFECT}.",
    ]
    if past_revert:
        reasons.append(f"ABI {release.build[0]} started after 3.16.81-1, so this build has the clock drift bug.")
    else:
        reasons.append(
            f"ABI {release.build[0]} may predate the revert, when 512ac999d275 was in 3.16.y: this build has either "
            "the slice expiry or the clock drift bug. /proc/version shows the package version."
        )
    return _Finding("affected", "clock_drift" if past_revert else None, "high", tuple(reasons), targets)


def _container_linux(release: KernelRelease) -> _Finding | None:
    rows = [row for row in _rows("container_linux", release.line) if row.change == "fix"]
    if not rows:
        return None
    row = rows[0]
    backport_sublevel = row.fixed_key[2]
    if release.patch >= backport_sublevel:
        return _Finding(
            "unknown",
            None,
            "low",
            (
                f"Container Linux build {release.raw}: the fix {FIX} was backported onto 4.19.{backport_sublevel} "
                f"according to {_evidence(row)}, but which release first shipped it was not found.",
                PROBE_HINT,
            ),
            _upstream_targets(release.line),
        )
    return _vendor_affected(release, rows, row.before, row.note)


_VENDOR_RULES: dict[str, Callable[[KernelRelease], _Finding | None]] = {
    "ubuntu": _ubuntu,
    "rhel": _rhel,
    "amazon_linux_2": _amazon_linux_2,
    "oracle_uek": _oracle_uek,
    "photon": _photon,
    "debian": _debian,
    "container_linux": _container_linux,
}


def _kernel_of(release: KernelRelease) -> str:
    if release.vendor == "unrecognized":
        return f"Kernel {release.raw} (a vendor suffix this tool does not recognise)"
    return f"The {VENDOR_LABELS[release.vendor]} kernel {release.raw}"


def _vendor_unknown(release: KernelRelease, upstream: _Finding) -> _Finding:
    label = VENDOR_LABELS[release.vendor]
    if release.sublevel_known:
        reasons = [
            f"{_kernel_of(release)} is built on upstream {release.base_text}, which does not have the fix {FIX}, "
            "and no record of a backport was found for it."
        ]
        if release.vendor == "cos":
            reasons.append("A trailing + is how COS reports its kernel (a locally built tree with changes does too).")
        if upstream.bug is not None:
            reasons.append(
                f"Without a vendor backport, upstream {release.base_text} has the {upstream.bug.replace('_', ' ')} bug."
            )
    else:
        reasons = [
            _frozen_base_sentence(release),
            f"No record of a {label} backport was found for {release.raw}, whose {release.major}.{release.minor} "
            f"base is below the fix {FIX}.",
        ]
    not_found = [row for row in VENDOR_BACKPORTS if row.vendor == release.vendor and row.status == "not_found"]
    if not_found:
        reasons.append(f"{not_found[0].line}: {not_found[0].evidence} of a backport.")
    if release.vendor == "debian":
        reasons.append(
            "/proc/version shows the Debian package version (e.g. 4.19.67-2+deb10u2), which names the upstream sublevel."
        )
    reasons.append(PROBE_HINT)
    return _Finding("unknown", None, "low", tuple(reasons), _upstream_targets(release.line))


def _assess(release: KernelRelease) -> _Finding:
    if release.vendor == "wsl" and release.flavour == "wsl1":
        return _Finding(
            "unknown",
            None,
            "low",
            (
                f"{release.raw} is WSL 1, which runs Linux programs on the Windows kernel: there is no Linux CFS "
                "scheduler, so the bug does not apply in its Linux form.",
                "Check how CPU limits are enforced on this node; WSL 2 runs a real Linux kernel.",
            ),
            ANY_FIXED_RELEASES,
        )
    upstream = _upstream(release)
    if release.vendor == "mainline":
        return upstream
    if upstream.verdict == "fixed":
        # Every vendor kernel carries at least the upstream release it names (vendors rebase on stable).
        note = f"{_kernel_of(release)} contains at least the upstream {release.base_text} release it names."
        return _Finding("fixed", None, "high", (*upstream.reasons, note))
    rule = _VENDOR_RULES.get(release.vendor)
    finding = rule(release) if rule else None
    return finding if finding is not None else _vendor_unknown(release, upstream)


def _shown(version: object) -> str:
    text = version.strip() if isinstance(version, str) else ("" if version is None else repr(version))
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


@functools.lru_cache(maxsize=1024)
def kernel_verdict(version: str) -> KernelVerdict:
    """Say whether a node kernel (`uname -r`, i.e. nodeInfo.kernelVersion) has the CFS slice expiry fix.

    Never raises on bad input: empty, None, non-strings, garbage, non-ASCII or overlong strings give "unknown" with a
    reason (the echoed `version` is cut to 80 characters). `fixed_in` is empty when fixed, otherwise the versions or
    vendor builds to move to. Results are cached per distinct string (any hashable argument is accepted).
    """
    shown = _shown(version)
    if not isinstance(version, str):
        reason = "No kernel version was given." if version is None else f"{shown} is not a kernel version string."
        return _unknown(shown, reason)
    text = version.strip()
    if not text:
        return _unknown(shown, "The node reported no kernel version.")
    if len(text) > MAX_RELEASE_CHARS:
        return _unknown(shown, f"{len(text)} characters is longer than any `uname -r` (at most 64).")
    if _WINDOWS.fullmatch(text):
        return _unknown(
            shown,
            f"{text} is a Windows build number (a Windows node): the CFS slice expiry bug is in the Linux scheduler "
            "and does not apply.",
        )
    release = parse_kernel_version(text)
    if release is None:
        return _unknown(
            shown,
            f"Could not read a Linux kernel release from {shown!r}: expected a `uname -r` string such as "
            "5.4.0-1018-gke, 4.14.133-113.105.amzn2.x86_64 or 3.10.0-1127.el7.x86_64.",
        )
    finding = _assess(release)
    return KernelVerdict(
        version=shown,
        verdict=finding.verdict,
        bug=finding.bug,
        fixed_in=() if finding.verdict == "fixed" else finding.fixed_in,
        confidence=finding.confidence,
        reasons=finding.reasons,
    )


def _unknown(shown: str, reason: str) -> KernelVerdict:
    return KernelVerdict(
        version=shown,
        verdict="unknown",
        bug=None,
        fixed_in=ANY_FIXED_RELEASES,
        confidence="low",
        reasons=(
            reason,
            f"Any kernel at or past mainline 5.4, or stable 5.3.9, 4.19.84 or 4.14.154, has the fix {FIX}.",
        ),
    )


__all__ = [
    "VENDOR_BACKPORTS",
    "Bug",
    "Confidence",
    "KernelRelease",
    "KernelVerdict",
    "VendorBackport",
    "Verdict",
    "compare_vendor_builds",
    "is_kernel_release",
    "kernel_verdict",
    "parse_kernel_version",
    "vendor_build_key",
]
