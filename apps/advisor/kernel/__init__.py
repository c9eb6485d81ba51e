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

The package: facts.py (commits, fixed releases, the vendor record), parsing.py (release strings), verdicts.py.
"""

from .facts import (
    VENDOR_BACKPORTS,
    Bug,
    Confidence,
    KernelRelease,
    KernelVerdict,
    VendorBackport,
    Verdict,
    compare_vendor_builds,
    vendor_build_key,
)
from .parsing import is_kernel_release, parse_kernel_version
from .verdicts import kernel_verdict

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
