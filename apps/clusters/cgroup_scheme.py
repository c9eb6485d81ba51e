"""Which cgroup version a node runs and, on v2, which shares→weight mapping its runtime uses, judged from what the
readings show. Pure Python: no Django import.

The kubelet always computes cpu.shares from the request; on cgroup v2 the runtime writes cpu.weight through one of
two mappings (linear before runc 1.3.2, log-quadratic from runc 1.3.2 / crun 1.23), and cAdvisor reads the weight
back into `container_spec_cpu_shares` with the linear inverse. So the scraped shares of a container with a known
request are the request's shares exactly on v1, and a tell-tale round trip on v2 (docs/domain.md#weight-mapping).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from apps.clusters.kubelet import MAX_SHARES, MAX_WEIGHT, MIN_SHARES, MIN_WEIGHT, WeightFormula, weight_from_shares
from apps.words import plural

Seen = Literal["cadvisor_shares", "weight"]
MAPPINGS: tuple[WeightFormula, ...] = ("linear", "quadratic")


@dataclass(frozen=True, slots=True)
class CgroupScheme:
    version: int | None  # 1, 2, or None when the readings do not tell
    mapping: str  # "linear" | "quadratic" | "" (not known, or v1)
    evidence: str  # what it was judged from, for the page


def weight_formula(cgroup_version: int | None, mapping: str) -> WeightFormula | None:
    """The mapping a node's floors are split by: its cgroup v2 mapping when one was seen; None (split by shares, as
    v1 does and the linear mapping nearly does) otherwise."""
    if cgroup_version == 2 and mapping == "linear":
        return "linear"
    if cgroup_version == 2 and mapping == "quadratic":
        return "quadratic"
    return None


def shares_from_weight_as_cadvisor(weight: int) -> int:
    """What cAdvisor reports as `container_spec_cpu_shares` for a cgroup v2 cpu.weight: the linear inverse,
    2 + (weight − 1) × 262142 // 9999, whatever mapping wrote the weight (google/cadvisor#3737)."""
    weight = max(MIN_WEIGHT, min(MAX_WEIGHT, weight))
    return MIN_SHARES + ((weight - MIN_WEIGHT) * (MAX_SHARES - MIN_SHARES)) // (MAX_WEIGHT - MIN_WEIGHT)


def _candidates(kubelet_shares: int, value: int, seen: Seen) -> set[str]:
    """The schemes ("v1", "linear", "quadratic") under which a container with `kubelet_shares` shows `value`."""
    matches: set[str] = set()
    for mapping in MAPPINGS:
        weight = weight_from_shares(kubelet_shares, mapping)
        expected = shares_from_weight_as_cadvisor(weight) if seen == "cadvisor_shares" else weight
        if value == expected:
            matches.add(mapping)
    if seen == "cadvisor_shares" and value == kubelet_shares:
        matches.add("v1")
    return matches


def judge_cgroup_scheme(
    observations: Iterable[tuple[int, int]],
    seen: Seen,
    *,
    cgroup_version: int | None = None,
    has_pressure: bool | None = None,
    source: str = "",
) -> CgroupScheme | None:
    """Judge from (kubelet shares of a container's request, the value read) pairs; None when nothing tells.

    A scheme is named only when a strict majority of the telling containers (shares above the minimum, where every
    scheme agrees) fit it and no other scheme fits as many: a resize between the inventory and the read, or a
    runtime writing its own weights, must not flip a node's verdict. `cgroup_version` is what the agent saw itself;
    CPU pressure series come from cgroup v2 only.
    """
    telling = 0
    votes = {"v1": 0, "linear": 0, "quadratic": 0}
    for kubelet_shares, value in observations:
        if kubelet_shares <= MIN_SHARES or kubelet_shares >= MAX_SHARES:
            continue
        telling += 1
        for scheme in _candidates(kubelet_shares, value, seen):
            votes[scheme] += 1
    if cgroup_version == 1:
        votes["linear"] = votes["quadratic"] = 0
    elif cgroup_version == 2 or seen == "weight":
        votes["v1"] = 0
    best = max(votes, key=lambda scheme: votes[scheme])
    decided = telling and votes[best] * 2 > telling and sum(v == votes[best] for v in votes.values()) == 1
    what = "cpu.weight" if seen == "weight" else "cpu.shares" if cgroup_version else "container_spec_cpu_shares"
    prefix = f"{source}: " if source else ""
    if decided:
        fit = f"{what} of {plural(telling, 'container')} with a request: {votes[best]} fit"
        if best == "v1":
            return CgroupScheme(1, "", f"{prefix}{fit} cgroup v1 (the request's shares as they are)")
        return CgroupScheme(2, best, f"{prefix}{fit} the {best} shares→weight mapping of cgroup v2")
    if cgroup_version in (1, 2):
        mapping_note = "" if cgroup_version == 1 else "; the weight mapping could not be told"
        return CgroupScheme(cgroup_version, "", f"{prefix}the agent read cgroup v{cgroup_version}{mapping_note}")
    if has_pressure:
        return CgroupScheme(2, "", f"{prefix}CPU pressure (PSI) series, which cgroup v2 alone has")
    return None
