"""`lab set`: change a running lab container by hand, as an operator changes a pod. No Django.

- ``limit`` / ``request``: an in-place resize (``kubectl patch pod … --subresource resize``). The workload keeps
  running (same pids); the container cgroup gets the quota and shares the kubelet converts them to, the pod cgroup
  the values the kubelet computes for the pod (ResourceConfigForPod), and ``kubepods/burstable`` the sum of the
  Burstable pods' requests (the kubelet's QoS manager), all with the lab's own layout code (cgroups.py). On cgroup v1
  a child's quota may not exceed its parent's, so, as the kubelet does, a pod whose quota grows is written before its
  container and one whose quota shrinks after it. A resize that would change the pod's QoS class is refused, as the
  API server refuses it: the pod's cgroup would have to move to another QoS level.
- ``processes``: a restart with the new count, as the kubelet restarts a container: the old processes stop (SIGTERM,
  SIGKILL after a grace) and their cgroup is removed, the container gets a new runtime id and a new cgroup under its
  pod's, the new workload starts in it, and the container's restart count goes up by one. Its counters start again
  from zero, as a restarted container's do; the collector sees a reset.

Everything is checked before anything is touched: a refused change leaves the state file and every cgroup as they
were. The state file is rewritten under the runtime's lock, so ``runtime.lab_inventory`` (which the collector reads
every cycle) reports the new request, limit, container id and restart count.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from apps.lab import cgroups, runtime
from apps.lab.cgroups import CgroupError, CgroupSettings, CpuController, Placement
from apps.lab.reports import LabChange, LabError
from apps.lab.scenario import QOS_GUARANTEED, Container, Pod, ScenarioError, Workload, container_id, quantity_mcpu
from apps.lab.workloads import KINDS, WorkloadError, normalize_params
from apps.words import excerpt, plural

LIMIT_NONE = "none"  # `--limit none`: remove the limit (quota -1)
# Workload kinds whose process count `--processes` sets: those with a `processes` parameter.
PROCESS_KINDS = tuple(sorted(kind for kind, spec in KINDS.items() if "processes" in spec.params))


def mcpu_text(mcpu: int | None) -> str:
    """A CPU quantity as kubectl writes it: ``250m``, ``2``, or ``none``."""
    if mcpu is None:
        return "none"
    return f"{mcpu // 1000}" if mcpu % 1000 == 0 else f"{mcpu}m"


@dataclass(frozen=True, slots=True)
class _Plan:
    """A checked change of one container: the pod and container before and after it."""

    name: str  # namespace/pod/container
    old_pod: Pod
    new_pod: Pod
    old_container: Container
    new_container: Container

    @property
    def resized(self) -> bool:
        old, new = self.old_container, self.new_container
        return (old.request_mcpu, old.limit_mcpu) != (new.request_mcpu, new.limit_mcpu)

    @property
    def restart(self) -> bool:
        return _processes(self.old_container.workload.params) != _processes(self.new_container.workload.params)


def set_container(
    target: str,
    *,
    limit: str | None = None,
    request: str | None = None,
    processes: int | None = None,
    state_dir: str | Path = runtime.DEFAULT_STATE_DIR,
) -> LabChange:
    """Resize (``limit``, ``request``) and/or restart with ``processes`` the running lab container ``target``
    (``NAMESPACE/POD/CONTAINER``). ``limit`` may be ``"none"``.

    Raises LabError, with one line saying why, when the lab is not up, the container is unknown, there is nothing to
    change, a quantity is bad, ``processes`` is out of the workload's range or its kind has none, or the change would
    change the pod's QoS class; then nothing has been changed.
    """
    if limit is None and request is None and processes is None:
        raise LabError("nothing to change: give --limit, --request or --processes")
    namespace, pod_name, container_name = _parse_target(target)
    new_limit = _parse_limit(limit) if limit is not None else None
    new_request = _quantity("--request", request, "a resize cannot remove a request") if request is not None else None
    with runtime._locked(state_dir):
        state, controller, scenario = runtime._running_state(state_dir)
        entries: list[dict[str, Any]] = state["containers"]
        entry = _find(entries, namespace, pod_name, container_name)
        old_pod = _pod(entries, namespace, pod_name)
        old_container = next(c for c in old_pod.containers if c.name == container_name)
        plan = _plan(
            old_pod,
            old_container,
            old_container.request_mcpu if request is None else new_request,
            old_container.limit_mcpu if limit is None else new_limit,
            processes,
        )
        if entry["pod_cgroup_relpath"] != os.path.join(state["root"], cgroups.pod_relpath(old_pod)):
            raise LabError(f"the lab's state file is damaged: {plan.name} is not where its pod's QoS class puts it")
        # Checked: from here on the cgroups and the state change.
        period_us = scenario.period_us
        pids_before = tuple(int(p["pid"]) for p in entry["processes"])
        cid_before = entry["container_id"]
        if plan.resized:
            allocatable = runtime.node_facts(scenario, controller).allocatable_mcpu or 1000
            _resize(controller, state["root"], entry, plan, _pods(entries), allocatable, period_us)
            entry["request_mcpu"] = plan.new_container.request_mcpu
            entry["limit_mcpu"] = plan.new_container.limit_mcpu
            runtime._write_state(state_dir, state)
        if plan.restart:
            _restart(controller, state, state_dir, entry, plan, period_us)
        container_cgroup = cgroups.container_settings(
            plan.new_pod, plan.new_container, entry["container_id"], period_us
        )
        pod_cgroup = cgroups.pod_settings(plan.new_pod, period_us)
        return LabChange(
            namespace=namespace,
            pod=pod_name,
            container=container_name,
            qos_class=plan.new_pod.qos_class,
            request_before=old_container.request_mcpu,
            request_after=plan.new_container.request_mcpu,
            limit_before=old_container.limit_mcpu,
            limit_after=plan.new_container.limit_mcpu,
            processes_before=_processes(old_container.workload.params),
            processes_after=_processes(plan.new_container.workload.params),
            resized=plan.resized,
            restarted=plan.restart,
            restarts=int(entry.get("restarts", 0)),
            container_id_before=cid_before,
            container_id_after=entry["container_id"],
            cgroup_relpath=entry["cgroup_relpath"],
            pids_before=pids_before,
            pids_after=tuple(int(p["pid"]) for p in entry["processes"]),
            quota_us=container_cgroup.quota_us,
            shares=container_cgroup.shares,
            pod_quota_us=pod_cgroup.quota_us,
            pod_shares=pod_cgroup.shares,
            period_us=period_us,
        )


# --- checks (nothing is touched) --------------------------------------------------------------------------------


def _plan(
    old_pod: Pod, old_container: Container, request_after: int | None, limit_after: int | None, processes: int | None
) -> _Plan:
    """The change, checked as the API server checks a resize; LabError when it is refused or changes nothing."""
    name = f"{old_pod.namespace}/{old_pod.name}/{old_container.name}"
    workload = old_container.workload
    if processes is not None:
        workload = Workload(workload.kind, MappingProxyType(_with_processes(name, workload, processes)))
    new_container = replace(old_container, request_mcpu=request_after, limit_mcpu=limit_after, workload=workload)
    new_pod = replace(
        old_pod, containers=tuple(new_container if c.name == new_container.name else c for c in old_pod.containers)
    )
    plan = _Plan(name, old_pod, new_pod, old_container, new_container)
    if not plan.resized and not plan.restart:
        has = f"request {mcpu_text(request_after)} and limit {mcpu_text(limit_after)}"
        if processes is not None:
            count = plural(processes, "process", "processes")
            has = f"request {mcpu_text(request_after)}, limit {mcpu_text(limit_after)} and {count}"
        raise LabError(f"nothing to change: {name} already has {has}")
    if request_after is not None and limit_after is not None and request_after > limit_after:
        raise LabError(
            f"refused: {name} would request {mcpu_text(request_after)}, more than its limit "
            f"{mcpu_text(limit_after)} (Kubernetes refuses a request above the limit)"
        )
    if new_pod.qos_class != old_pod.qos_class:
        hint = " (a Guaranteed pod keeps request = limit: give both)" if old_pod.qos_class == QOS_GUARANTEED else ""
        raise LabError(
            f"refused: this would change pod {old_pod.namespace}/{old_pod.name}'s QoS class from "
            f"{old_pod.qos_class} to {new_pod.qos_class}, and Kubernetes refuses a resize that changes the QoS "
            f"class{hint}"
        )
    return plan


def _parse_target(target: str) -> tuple[str, str, str]:
    parts = target.split("/")
    if len(parts) != 3 or not all(parts):
        raise LabError(f"{excerpt(target)} is not NAMESPACE/POD/CONTAINER (e.g. shop/web-1/app)")
    return parts[0], parts[1], parts[2]


def _quantity(option: str, raw: str, zero: str) -> int:
    try:
        return quantity_mcpu("lab set", option, raw, zero=zero)
    except ScenarioError as exc:
        raise LabError(f"{option}: {exc.message}") from None


def _parse_limit(raw: str) -> int | None:
    """The new limit in mcpu, None for ``none`` (no limit)."""
    if raw.strip().lower() == LIMIT_NONE:
        return None
    return _quantity("--limit", raw, f"use --limit {LIMIT_NONE} to remove the limit")


def _find(entries: Sequence[dict[str, Any]], namespace: str, pod: str, container: str) -> dict[str, Any]:
    for entry in entries:
        if (entry["namespace"], entry["pod"], entry["container"]) == (namespace, pod, container):
            return entry
    in_pod = [e["container"] for e in entries if (e["namespace"], e["pod"]) == (namespace, pod)]
    if in_pod:
        raise LabError(f"no container {container!r} in lab pod {namespace}/{pod} (it has: {', '.join(in_pod)})")
    raise LabError(f"no lab pod {namespace}/{pod} (`manage.py lab status` lists the lab's containers)")


def _with_processes(name: str, workload: Workload, processes: int) -> dict[str, Any]:
    if workload.kind not in PROCESS_KINDS:
        raise LabError(
            f"--processes: {name} runs workload {workload.kind!r}, which has no process count "
            f"(the kinds that have one: {', '.join(PROCESS_KINDS)})"
        )
    try:
        return normalize_params(workload.kind, {**workload.params, "processes": processes})
    except WorkloadError as exc:
        raise LabError(f"--processes: {exc}") from None


def _processes(params: Mapping[str, Any]) -> int | None:
    value = params.get("processes")
    return None if value is None else int(value)


def _container(entry: Mapping[str, Any]) -> Container:
    workload = Workload(entry["workload"], MappingProxyType(dict(entry["workload_params"])))
    return Container(entry["container"], entry["request_mcpu"], entry["limit_mcpu"], workload)


def _pod(entries: Sequence[Mapping[str, Any]], namespace: str, name: str) -> Pod:
    """The pod as the lab runs it now (its containers' current values), from the state's container entries."""
    mine = [e for e in entries if (e["namespace"], e["pod"]) == (namespace, name)]
    first = mine[0]
    return Pod(namespace, name, first["workload_kind"], first["workload_name"], tuple(_container(e) for e in mine))


def _pods(entries: Sequence[Mapping[str, Any]]) -> list[Pod]:
    keys = dict.fromkeys((e["namespace"], e["pod"]) for e in entries)
    return [_pod(entries, namespace, name) for namespace, name in keys]


# --- changes ----------------------------------------------------------------------------------------------------


def _grows(before: int | None, after: int | None) -> bool:
    """Whether a quota (None: unlimited) does not shrink."""
    return after is None or (before is not None and after >= before)


def _resize(
    controller: CpuController,
    root: str,
    entry: Mapping[str, Any],
    plan: _Plan,
    pods_before: Sequence[Pod],
    allocatable_mcpu: int,
    period_us: int,
) -> None:
    """Write the new settings in the kubelet's order; on a failed write, write back what was there and raise."""
    cid = entry["container_id"]
    container_write = (
        controller.cpu_dir(entry["cgroup_relpath"]),
        cgroups.container_settings(plan.old_pod, plan.old_container, cid, period_us),
        cgroups.container_settings(plan.new_pod, plan.new_container, cid, period_us),
    )
    pod_write = (
        controller.cpu_dir(entry["pod_cgroup_relpath"]),
        cgroups.pod_settings(plan.old_pod, period_us),
        cgroups.pod_settings(plan.new_pod, period_us),
    )
    writes = [pod_write, container_write]
    if not _grows(pod_write[1].quota_us, pod_write[2].quota_us):
        writes.reverse()  # cgroup v1: a child's quota may not exceed its parent's
    pods_after = [plan.new_pod if p.uid == plan.old_pod.uid else p for p in pods_before]
    qos_before = cgroups.qos_settings(pods_before, allocatable_mcpu, period_us)
    qos_after = cgroups.qos_settings(pods_after, allocatable_mcpu, period_us)
    for before, after in zip(qos_before, qos_after, strict=True):
        if before != after:
            writes.append((controller.cpu_dir(os.path.join(root, after.relpath)), before, after))
    touched: list[tuple[str, CgroupSettings]] = []
    try:
        for directory, before, after in writes:
            touched.append((directory, before))
            cgroups.write_settings(controller, directory, after)
    except CgroupError as exc:
        failed: list[str] = []
        for directory, before in reversed(touched):
            try:
                cgroups.write_settings(controller, directory, before)
            except CgroupError as again:
                failed.append(str(again))
        back = f"; could not set back: {'; '.join(failed)}" if failed else "; its cgroups were set back"
        raise LabError(f"could not resize {plan.name}: {exc}{back}") from None


def _restart(
    controller: CpuController,
    state: dict[str, Any],
    state_dir: str | Path,
    entry: dict[str, Any],
    plan: _Plan,
    period_us: int,
) -> None:
    """Stop the container's processes and start its workload again in a new cgroup under a new container id."""
    pod, container, name = plan.new_pod, plan.new_container, plan.name
    root, boot = state["root"], int(state["boot"])
    restarts = int(entry.get("restarts", 0)) + 1
    cid = container_id(pod.uid, container.name, boot, restarts)
    settings = cgroups.container_settings(pod, container, cid, period_us)
    old_relpath = os.path.relpath(entry["cgroup_relpath"], root)
    pod_relpath = os.path.relpath(entry["pod_cgroup_relpath"], root)

    runtime._stop_recorded({"containers": [entry]}, runtime._STOP_GRACE_S)
    removal = cgroups.remove_tree(controller, root, old_relpath)  # the workers, which die with their leader
    # From here the old container is gone: the state says so whatever happens next.
    entry.update(
        container_id=cid,
        cgroup_relpath=os.path.join(root, settings.relpath),
        workload_params=dict(container.workload.params),
        processes=[],
        restarts=restarts,
    )
    runtime._write_state(state_dir, state)
    if removal.leftover:
        raise LabError(f"could not remove {name}'s old cgroup: {'; '.join(removal.leftover)}")
    placement = Placement(pod, container, cid, pod_relpath, settings.relpath)
    log_dir = Path(state_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        cgroups.create_cgroup(controller, root, settings)
        child = runtime._start_workload(controller, root, placement, log_dir)
        runtime._wait_joined(controller, root, [(placement, child)])
    except (CgroupError, OSError, LabError) as exc:
        with contextlib.suppress(CgroupError):
            cgroups.remove_tree(controller, root, settings.relpath)
        raise LabError(f"{name} was stopped but did not start again: {exc}") from None
    entry["processes"] = [{"pid": child.pid, "start_ticks": runtime.process_start_ticks(child.pid)}]
    runtime._write_state(state_dir, state)
