"""Reading a kernel release string (`uname -r`, a node's status.nodeInfo.kernelVersion) into its upstream base,
vendor, flavour and build. Pure Python."""

from __future__ import annotations

import re
from collections.abc import Callable

from .facts import KernelRelease, VendorName

# --- Parsing -----------------------------------------------------------------------------------------------------

# `uname -r` is at most 64 characters (__NEW_UTS_LEN); anything much longer is not a kernel release.
MAX_RELEASE_CHARS = 128
SHOWN_CHARS = 80

_BASE = r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9]{1,3})\.(?P<patch>[0-9]{1,6})"
_ARCH = r"(?:\.(?:x86_64|aarch64|arm64|i686|i386|ppc64le|ppc64|s390x|armv7hl))?"
_DEBIAN_ARCH = (
    r"(?:cloud-|rt-)?(?:amd64|arm64|armmp|armmp-lpae|686|686-pae|i386|powerpc64le|ppc64el|s390x|"
    r"mips64r2el|mips32r2el|octeon|loongson-3|marvell|rpi|4kc-malta|5kc-malta|riscv64)"
)
_SUSE_FLAVOURS = r"(?:default|azure|preempt|rt|kvmsmall|64kb|ec2|xen|vanilla|pae|lpae)"
WINDOWS_RELEASE = re.compile(r"10\.0\.[0-9]{5}(?:\.[0-9]+)?", re.ASCII)
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
    if not text or len(text) > MAX_RELEASE_CHARS or not text.isascii() or WINDOWS_RELEASE.fullmatch(text):
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
