"""The copyable change beside a recommendation: a kubectl command and YAML that Kubernetes tools accept as written."""

from __future__ import annotations

import shlex

import pytest
import yaml

from apps.advisor.snippets import cpu_quantity, resource_change


def change(**overrides: object):
    args: dict = {
        "namespace": "shop",
        "pod": "api-7d9f-x2",
        "container": "main",
        "workload_kind": "Deployment",
        "workload_name": "api",
        "request_mcpu": 1000,
        "limit_mcpu": 1000,
    }
    args.update(overrides)
    return resource_change(**args)


def test_kubectl_sets_request_and_limit_on_the_owning_workload() -> None:
    assert change().kubectl == (
        "kubectl set resources deployment/api -c main --requests=cpu=1000m --limits=cpu=1000m -n shop"
    )


def test_only_the_values_suggested_are_set() -> None:
    assert change(request_mcpu=None, limit_mcpu=600).kubectl.split()[6:] == ["--limits=cpu=600m", "-n", "shop"]
    assert change(request_mcpu=50, limit_mcpu=None).kubectl.split()[6:] == ["--requests=cpu=50m", "-n", "shop"]


def test_no_suggested_values_means_no_change_to_copy() -> None:
    assert change(request_mcpu=None, limit_mcpu=None) is None


@pytest.mark.parametrize(
    ("kind", "name", "target"),
    [("StatefulSet", "cache", "statefulset/cache"), ("DaemonSet", "agent", "daemonset/agent"),
     ("CronJob", "nightly", "cronjob/nightly"), ("", "", "pod/api-7d9f-x2"), ("Node", "x", "pod/api-7d9f-x2")],
)  # fmt: skip
def test_the_target_is_the_owner_kubectl_knows_or_else_the_pod(kind: str, name: str, target: str) -> None:
    assert change(workload_kind=kind, workload_name=name).target == target


def test_the_yaml_is_the_container_entry_with_the_new_cpu_values() -> None:
    parsed = yaml.safe_load(change(request_mcpu=250, limit_mcpu=600).yaml)
    assert parsed == [{"name": "main", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "600m"}}}]


def test_a_container_name_yaml_would_retype_is_quoted() -> None:
    for name in ("123", "null", "yes"):
        assert yaml.safe_load(change(container=name).yaml)[0]["name"] == name


def test_names_with_shell_characters_are_quoted() -> None:
    command = change(container="a b;rm -rf").kubectl
    assert shlex.split(command)[5] == "a b;rm -rf"


def test_cpu_quantities_are_millicores_and_never_negative() -> None:
    assert cpu_quantity(2000) == "2000m"
    with pytest.raises(ValueError, match="-5"):
        cpu_quantity(-5)
