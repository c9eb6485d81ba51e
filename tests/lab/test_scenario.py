"""Scenario files: what a user writes, what the lab understands, and the errors a typo gets."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import pytest

from apps.lab.scenario import (
    DEFAULT_SCENARIO,
    QOS_BEST_EFFORT,
    QOS_BURSTABLE,
    QOS_GUARANTEED,
    ScenarioError,
    container_id,
    load_scenario,
    parse_scenario,
    pod_uid,
)
from apps.lab.workloads import KINDS, estimated_demand

MINIMAL = """
pods:
  - namespace: shop
    name: web-1
    containers:
      - name: app
        request: 250m
        limit: 500m
        workload: {kind: burner, params: {processes: 2}}
"""


def _error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="bad.yaml")
    return caught.value


def _one_container(request: str | None, limit: str | None) -> str:
    lines = ["pods:", "  - namespace: shop", "    name: web-1", "    containers:", "      - name: app"]
    if request is not None:
        lines.append(f"        request: {request}")
    if limit is not None:
        lines.append(f"        limit: {limit}")
    lines.append("        workload: idle")
    return "\n".join(lines) + "\n"


def test_a_minimal_scenario_reads_into_pods_and_containers() -> None:
    scenario = parse_scenario(MINIMAL)
    (pod,) = scenario.pods
    (container,) = pod.containers
    assert (pod.namespace, pod.name, pod.qos_class) == ("shop", "web-1", QOS_BURSTABLE)
    assert (container.request_mcpu, container.limit_mcpu) == (250, 500)
    assert container.workload.kind == "burner"
    assert container.workload.params["processes"] == 2
    assert scenario.period_us == 100_000


def test_workload_parameters_left_out_take_their_defaults() -> None:
    scenario = parse_scenario(MINIMAL.replace("{kind: burner, params: {processes: 2}}", "fibtest"))
    params = scenario.pods[0].containers[0].workload.params
    assert params["slow_steps"] == 100 and params["slow_sleep_ms"] == 10.0  # the talk's fibtest: 100 steps, 10 ms


@pytest.mark.parametrize(
    ("request_text", "limit_text", "qos"),
    [
        (None, None, QOS_BEST_EFFORT),
        ("500m", "500m", QOS_GUARANTEED),
        ("0.5", "500m", QOS_GUARANTEED),  # the same quantity written two ways
        (None, "1", QOS_GUARANTEED),  # a limit alone: the API server copies it into the request
        ("250m", "500m", QOS_BURSTABLE),
        ("250m", None, QOS_BURSTABLE),
    ],
)
def test_qos_class_follows_kubernetes_rules(request_text: str | None, limit_text: str | None, qos: str) -> None:
    assert parse_scenario(_one_container(request_text, limit_text)).pods[0].qos_class == qos


def test_a_limit_without_a_request_requests_the_limit() -> None:
    container = parse_scenario(_one_container(None, "750m")).pods[0].containers[0]
    assert (container.request_mcpu, container.limit_mcpu) == (750, 750)


def test_a_pod_is_guaranteed_only_when_every_container_is() -> None:
    text = _one_container("500m", "500m") + (
        "      - name: sidecar\n        request: 100m\n        limit: 200m\n        workload: idle\n"
    )
    pod = parse_scenario(text).pods[0]
    assert pod.qos_class == QOS_BURSTABLE
    assert (pod.request_mcpu, pod.limit_mcpu) == (600, 700)


def test_a_pod_with_an_unlimited_container_has_no_pod_limit() -> None:
    text = _one_container("500m", "500m") + "      - name: sidecar\n        request: 100m\n        workload: idle\n"
    assert parse_scenario(text).pods[0].limit_mcpu is None


def test_pod_uids_are_stable_uuid5_per_namespace_and_name() -> None:
    uid = pod_uid("shop", "web-1")
    assert uuid.UUID(uid).version == 5
    assert uid == pod_uid("shop", "web-1")
    assert uid != pod_uid("batch", "web-1")
    assert uid != pod_uid("shop", "web-2")
    assert parse_scenario(MINIMAL).pods[0].uid == uid


def test_container_ids_look_like_runtime_ids_and_change_on_restart() -> None:
    uid = pod_uid("shop", "web-1")
    first, restarted = container_id(uid, "app", 1), container_id(uid, "app", 2)
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert first == hashlib.sha256(f"{uid}/app/1".encode()).hexdigest()
    assert restarted != first
    assert container_id(uid, "sidecar", 1) != first


def test_node_and_period_can_be_set() -> None:
    scenario = parse_scenario("node: {name: lab-node, allocatable: 1500m}\nperiod_us: 50000\n" + MINIMAL)
    assert (scenario.node_name, scenario.allocatable_mcpu, scenario.period_us) == ("lab-node", 1500, 50_000)


def test_the_default_scenario_loads() -> None:
    scenario = load_scenario()
    assert scenario.source == str(DEFAULT_SCENARIO)
    assert {p.namespace for p in scenario.pods} == {"shop", "batch", "lab-probe"}
    assert {p.qos_class for p in scenario.pods} == {QOS_GUARANTEED, QOS_BURSTABLE, QOS_BEST_EFFORT}


def test_the_default_scenario_exercises_every_workload_kind() -> None:
    kinds = {c.workload.kind for p in load_scenario().pods for c in p.containers}
    assert kinds == set(KINDS)


def test_the_default_scenario_stays_light_on_a_two_cpu_machine() -> None:
    # The brief for the lab: total demand ≲ 1.3 cores so the machine stays usable; bursts may add a little.
    demands = [
        estimated_demand(c.workload.kind, c.workload.params, c.limit_mcpu / 1000 if c.limit_mcpu else None)
        for p in load_scenario().pods
        for c in p.containers
    ]
    assert sum(d.average_cores for d in demands) <= 1.3
    assert sum(d.peak_cores for d in demands) <= 1.5


def test_the_default_scenario_has_the_cases_its_comments_promise() -> None:
    containers = {(p.name.split("-")[0], c.name): (p, c) for p in load_scenario().pods for c in p.containers}
    _, too_few = containers[("pricing", "engine")]
    assert too_few.workload.kind == "single" and too_few.request_mcpu == 2000 and (too_few.limit_mcpu or 0) >= 2000
    _, many = containers[("search", "indexer")]
    assert many.workload.kind == "burner" and int(many.workload.params["processes"]) >= 8
    assert (many.limit_mcpu or 0) <= 200
    best_effort, _ = containers[("log", "shipper")]
    assert best_effort.qos_class == QOS_BEST_EFFORT


# --- errors --------------------------------------------------------------------------------------------------


def test_a_bad_quantity_names_the_file_the_field_and_the_value() -> None:
    error = _error(_one_container("5OOm", None))
    assert error.source == "bad.yaml"
    assert error.field == "pods[0].containers[0].request"
    assert "5OOm" in str(error) and str(error).startswith("bad.yaml: pods[0].containers[0].request:")


def test_a_request_above_the_limit_is_refused() -> None:
    error = _error(_one_container("2", "1"))
    assert error.field == "pods[0].containers[0].request"
    assert "more than the limit" in error.message


def test_a_misspelt_key_is_refused_with_the_allowed_ones() -> None:
    error = _error(MINIMAL.replace("limit: 500m", "limits: 500m"))
    assert error.field == "pods[0].containers[0]"
    assert "'limits'" in error.message and "limit" in error.message


def test_an_unknown_workload_kind_is_refused() -> None:
    error = _error(MINIMAL.replace("kind: burner", "kind: miner"))
    assert error.field == "pods[0].containers[0].workload"
    assert "'miner'" in error.message and "burner" in error.message


def test_an_out_of_range_workload_parameter_is_refused() -> None:
    error = _error(MINIMAL.replace("processes: 2", "processes: 0"))
    assert "'processes'" in error.message and "minimum" in error.message


def test_an_unknown_workload_parameter_is_refused() -> None:
    error = _error(MINIMAL.replace("processes: 2", "threads: 2"))
    assert "'threads'" in error.message and "processes" in error.message


def test_a_pod_defined_twice_is_refused() -> None:
    pod = MINIMAL.split("pods:\n", 1)[1]
    error = _error("pods:\n" + pod + pod)
    assert error.field == "pods[1]" and "shop/web-1" in error.message and "pods[0]" in error.message


def test_a_container_name_used_twice_in_a_pod_is_refused() -> None:
    text = _one_container("1", "1") + "      - name: app\n        workload: idle\n"
    assert _error(text).field == "pods[0].containers[1]"


def test_a_namespace_that_is_not_a_dns_label_is_refused() -> None:
    error = _error(MINIMAL.replace("namespace: shop", "namespace: Shop_Floor"))
    assert error.field == "pods[0].namespace" and "Shop_Floor" in error.message


@pytest.mark.parametrize("value", ["true", "0", "-1"])
def test_a_quantity_that_is_not_a_positive_cpu_amount_is_refused(value: str) -> None:
    assert _error(_one_container(None, value)).field == "pods[0].containers[0].limit"


def test_an_owner_kind_without_a_name_is_refused() -> None:
    error = _error(MINIMAL.replace("name: web-1", "name: web-1\n    workload_kind: Deployment"))
    assert "workload_name" in error.message


def test_broken_yaml_is_reported_as_such() -> None:
    assert _error("pods: [unclosed").field == "(yaml)"


def test_a_top_level_list_is_refused() -> None:
    assert "must be a mapping" in _error("- a\n- b\n").message


def test_a_scenario_without_pods_is_refused() -> None:
    assert _error("pods: []\n").field == "pods"


def test_a_period_out_of_the_kubelet_range_is_refused() -> None:
    assert _error("period_us: 5000000\n" + MINIMAL).field == "period_us"


def test_a_missing_file_names_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ScenarioError) as caught:
        load_scenario(missing)
    assert caught.value.source == str(missing) and "cannot read" in caught.value.message
