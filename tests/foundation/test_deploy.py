"""The Kubernetes manifests in deploy/ are valid objects, and the commands they run exist here."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy").glob("*.yaml"))
K8S_VERSION = "1.33.0"


def documents() -> list[tuple[str, dict]]:
    docs = []
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


def containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    template = spec.get("template") or spec.get("jobTemplate", {}).get("spec", {}).get("template", {})
    return template.get("spec", {}).get("containers", [])


@pytest.mark.parametrize(("name", "doc"), documents(), ids=[n for n, _ in documents()])
def test_manifest_is_a_valid_kubernetes_object(name, doc):
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_read_role_is_read_only_and_proxy_access_is_separate():
    roles = {doc["metadata"]["name"]: doc for _, doc in documents() if doc["kind"] == "ClusterRole"}
    verbs = {verb for rule in roles["cputune-read"]["rules"] for verb in rule["verbs"]}
    resources = {r for rule in roles["cputune-read"]["rules"] for r in rule["resources"]}
    assert verbs <= {"get", "list", "watch"}
    assert "nodes/proxy" not in resources and "nodes/metrics" in resources
    assert {r for rule in roles["cputune-kubelet-proxy"]["rules"] for r in rule["resources"]} == {"nodes/proxy"}


def test_every_manage_py_command_in_the_manifests_exists():
    from django.core.management import get_commands

    known = get_commands()
    used = set()
    for _, doc in documents():
        for container in containers(doc):
            words = shlex.split(" ".join(container.get("command", [])))
            for i, word in enumerate(words):
                if word == "manage.py":
                    used.add(words[i + 1])
    assert used and used <= set(known), f"unknown commands: {used - set(known)}"


def test_the_agent_daemonset_arguments_parse_with_the_agent(monkeypatch):
    from agent import cputune_agent as agent

    monkeypatch.setenv("CPUTUNE_AGENT_TOKEN", "from-the-secret")  # the DaemonSet passes the token this way

    daemonset = next(doc for _, doc in documents() if doc["kind"] == "DaemonSet")
    (container,) = containers(daemonset)
    parser = argparse.ArgumentParser()
    agent.add_arguments(parser)
    options = parser.parse_args(container["args"])
    assert options.server.startswith("http") and options.cgroup_root == "/host/sys/fs/cgroup"
    assert options.token == "from-the-secret"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/host/sys/fs/cgroup"]["readOnly"] is True
