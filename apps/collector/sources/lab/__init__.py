"""The lab source: `client` (the lab's state and cgroups), `convert` (the agent's payload → named readings), `source`."""
