"""YAML from outside is read with bounds (issue 14, item 6): an 800-byte pods.yaml of nested aliases took 112 s and
3.1 GB (or raised MemoryError), and error messages repr()'d the expanded values. Every YAML reader (dumps, lab
scenarios, the stand-in's cluster folders) goes through apps.yaml_input.load_yaml."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from apps.clusters.models import Cluster
from apps.collector.dump import DumpError, import_dump
from apps.lab.scenario import MAX_SCENARIO_CHARS, ScenarioError, parse_scenario
from apps.yaml_input import MAX_ALIAS_NODES, MAX_YAML_CHARS, YamlError, load_yaml

NODES = Path(__file__).resolve().parents[1] / "fixtures" / "clusters" / "k8s-1.33-minikube" / "nodes.yaml"
LEVELS = {"6561-leaves": 4, "387-million-leaves": 9}


def nested_aliases(levels: int) -> str:
    """A flow list of `levels` anchors, each a list of nine aliases of the one before: 9 ** levels leaves in
    ~40 bytes a level. Anything that walks it whole (repr() in an error message) never ends."""
    lists = ["&l0 [x, x, x, x, x, x, x, x, x]"]
    lists += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return f"[{', '.join(lists)}]"


@pytest.mark.django_db
@pytest.mark.parametrize("levels", LEVELS.values(), ids=LEVELS.keys())
def test_a_pods_file_of_nested_aliases_is_refused_at_once(tmp_path, levels):
    pods = tmp_path / "pods.yaml"
    pods.write_text(f"""apiVersion: v1
kind: List
items:
- kind: Pod
  metadata: {{name: web-0, namespace: shop, uid: 6c1f2b0e-3d4a-4f5b-8c6d-7e8f90a1b2c3}}
  spec:
    nodeName: minikube
    containers:
    - name: app
      resources: {{limits: {{cpu: {nested_aliases(levels)}}}}}
  status: {{phase: Running}}
""")
    assert pods.stat().st_size < 1000
    started = time.monotonic()
    with pytest.raises(DumpError) as refused:
        import_dump("mk", NODES, pods, {})
    assert time.monotonic() - started < 2
    message = str(refused.value)
    assert f"is refused: aliases stand for more than {MAX_ALIAS_NODES:,} nodes (at line 10, column " in message
    assert len(message) < 300
    assert not Cluster.objects.exists()


def test_a_scenario_of_nested_aliases_is_refused_at_once():
    started = time.monotonic()
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(f"description: {nested_aliases(9)}\npods: []\n", source="bomb.yaml")
    assert time.monotonic() - started < 2
    assert refused.value.field == "(yaml)"
    assert refused.value.message.startswith(f"aliases stand for more than {MAX_ALIAS_NODES:,} nodes (at line 1, ")


def test_an_alias_inside_the_node_it_names_is_refused():
    with pytest.raises(YamlError, match=r"the alias at line 1, column 11 is inside the node it names \(a cycle\)"):
        load_yaml("a: &a [x, *a]\n")


def test_the_few_aliases_a_hand_written_scenario_uses_still_load():
    scenario = parse_scenario(
        """
pods:
  - &web
    namespace: shop
    name: web-1
    workload_kind: Deployment
    workload_name: web
    containers:
      - &app {name: app, request: 250m, limit: 500m, workload: {kind: burner, params: {processes: 1}}}
  - {<<: *web, name: web-2}
  - {<<: *web, name: web-3, containers: [{<<: *app, limit: "1"}]}
""",
        source="merge.yaml",
    )
    assert [(p.name, p.containers[0].limit_mcpu) for p in scenario.pods] == [
        ("web-1", 500),
        ("web-2", 500),
        ("web-3", 1000),
    ]


@pytest.mark.django_db
def test_documents_over_the_cap_are_refused_before_they_are_parsed(tmp_path):
    with pytest.raises(ScenarioError, match=f"{MAX_SCENARIO_CHARS + 1:,} characters, more than the "):
        parse_scenario("#" * (MAX_SCENARIO_CHARS + 1), source="big.yaml")
    pods = tmp_path / "pods.yaml"
    pods.write_text("items: []\n" + "#" * MAX_YAML_CHARS)
    with pytest.raises(DumpError, match=f"is refused: {MAX_YAML_CHARS + 10:,} characters, more than the "):
        import_dump("mk", NODES, pods, {})


@pytest.mark.django_db
def test_a_value_no_yaml_type_can_hold_is_a_refusal_not_a_crash(tmp_path):
    pods = tmp_path / "pods.yaml"
    pods.write_text("kind: List\nitems: []\ncreated: 2026-13-45\n")
    with pytest.raises(DumpError, match=r"is refused: a value cannot be read: month must be in 1\.\.12"):
        import_dump("mk", NODES, pods, {})


def test_scenario_messages_quote_a_bounded_excerpt():
    with pytest.raises(ScenarioError) as refused:
        parse_scenario(f"description: [{', '.join(['x' * 1000] * 1000)}]\npods: []\n", source="big.yaml")
    assert refused.value.field == "description"
    assert len(refused.value.message) < 100
