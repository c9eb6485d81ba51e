"""What the lab source reads: the lab runtime's state (its inventory, whether it runs) and the lab's cgroups, through
the node agent's cgroupfs reader — the same code that runs on real nodes."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from django.conf import settings

from agent import cputune_agent
from apps.lab import runtime

__all__ = ["lab_running", "lab_state_dir", "read_cgroups", "read_inventory"]


def lab_state_dir() -> Path:
    return Path(settings.DATA_DIR) / "lab"


def lab_running() -> bool:
    return runtime.lab_status(lab_state_dir()).running


def read_inventory() -> runtime.LabInventory:
    """The running lab's node, pods and where their cgroups are, read fresh: the lab changes under the collector."""
    return runtime.lab_inventory(lab_state_dir())


def read_cgroups(lab: runtime.LabInventory, node: str, now: datetime) -> cputune_agent.Payload:
    """The agent's payload for every kubelet-style cgroup under the lab's root, on its cgroup v1 or v2 mounts."""
    cpu_root = os.path.join(lab.cpu_mount, lab.root)
    if lab.cgroup_version == 2:
        return cputune_agent.collect(cgroup_root_v2=cpu_root, node_name=node, now=now)
    cpuacct_root = os.path.join(lab.cpuacct_mount, lab.root) if lab.cpuacct_mount else None
    return cputune_agent.collect(
        cgroup_root_v1_cpu=cpu_root, cgroup_root_v1_cpuacct=cpuacct_root, node_name=node, now=now
    )
