"""From a parsed release to a verdict — fixed, affected or unknown — with the reasons (docs/domain.md#kernel-verdicts).
Pure Python."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from .facts import (
    ANY_FIXED_RELEASES,
    FIX,
    LTS_FIXED_RELEASES,
    MAINLINE_FIX_LINE,
    PROBE_HINT,
    REVERT_512AC999_3_16_SUBLEVEL,
    STABLE_512AC999_SUBLEVEL,
    STABLE_FIX_SUBLEVEL,
    VENDOR_BACKPORTS,
    VENDOR_LABELS,
    BackportStatus,
    Bug,
    Confidence,
    KernelRelease,
    KernelVerdict,
    VendorBackport,
    VendorName,
    Verdict,
)
from .parsing import MAX_RELEASE_CHARS, SHOWN_CHARS, WINDOWS_RELEASE, parse_kernel_version

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
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


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
    if WINDOWS_RELEASE.fullmatch(text):
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
