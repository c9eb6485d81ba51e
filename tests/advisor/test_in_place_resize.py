"""The in-place resize line: offered on Kubernetes ≥ 1.33 beside the template change, never when the change could
alter the pod's QoS class (the API refuses those), with the reason instead."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from apps.advisor.snippets import in_place_resize
from apps.collector.inventory import pods_from_objects

FIXTURE = Path(__file__).parent.parent / "fixtures" / "kubelet" / "pods-in-place-resize.json"


def resized_pod():
    """The real pod of the fixture: Guaranteed; its spec asks 500m, its status says 200m request = limit are applied
    (a resize under way), and cputune keeps what is applied: that is what throttles."""
    [pod], problems = pods_from_objects(json.loads(FIXTURE.read_text())["items"])
    assert problems == [] and pod.qos_class == "Guaranteed"
    return pod


def resize(pod, container, request, limit, version="v1.34.1"):
    return in_place_resize(
        namespace=pod.namespace,
        pod=pod.name,
        container=container,
        request_mcpu=request,
        limit_mcpu=limit,
        kubelet_version=version,
        qos_class=pod.qos_class,
        containers=[(c.name, c.request_mcpu, c.limit_mcpu) for c in pod.containers],
    )


def test_a_guaranteed_pod_resized_to_an_equal_request_and_limit_gets_the_patch_line():
    pod = resized_pod()
    [c] = pod.containers
    assert (c.request_mcpu, c.limit_mcpu) == (200, 200)

    line = resize(pod, c.name, 800, 800)

    assert line is not None and line.why_not is None and line.kubectl is not None
    words = shlex.split(line.kubectl)
    assert words[:7] == ["kubectl", "patch", "pod", "resized-pod", "-n", "default", "--subresource"]
    patch = json.loads(words[words.index("--patch") + 1])
    assert patch == {
        "spec": {
            "containers": [{"name": c.name, "resources": {"requests": {"cpu": "800m"}, "limits": {"cpu": "800m"}}}]
        }
    }


def test_raising_only_the_limit_of_a_guaranteed_pod_gets_no_patch_line_and_says_why():
    pod = resized_pod()
    line = resize(pod, "resized-container", None, 800)
    assert line is not None and line.kubectl is None
    assert line.why_not is not None and line.why_not.startswith("the pod is Guaranteed")
    assert "resized-container with a CPU request unlike its limit" in line.why_not


def test_burstable_and_best_effort_pods():
    pod = resized_pod()
    burstable = [("app", 250, 500), ("sidecar", 50, None)]
    common = dict(namespace="shop", pod="api-0", kubelet_version="v1.33.2-eks-1", qos_class="Burstable")
    raised = in_place_resize(container="app", request_mcpu=None, limit_mcpu=1000, containers=burstable, **common)
    assert raised is not None and raised.kubectl is not None and "--subresource resize" in raised.kubectl
    # Every container with request = limit afterwards: the pod could become Guaranteed, so no resize.
    equal = [("app", 500, 400)]
    same = in_place_resize(container="app", request_mcpu=None, limit_mcpu=500, containers=equal, **common)
    assert same is not None and same.kubectl is None and "can make the pod Guaranteed" in (same.why_not or "")
    best = in_place_resize(
        container="app", request_mcpu=100, limit_mcpu=None, containers=[("app", None, None)],
        **{**common, "qos_class": "BestEffort"},
    )  # fmt: skip
    assert best is not None and best.kubectl is None and (best.why_not or "").startswith("the pod is BestEffort")
    assert resize(pod, "resized-container", None, None) is None  # nothing to change


def test_clusters_before_1_33_or_of_unknown_version_get_no_patch_line():
    pod = resized_pod()
    old = resize(pod, "resized-container", 800, 800, version="v1.32.9")
    assert old is not None and old.kubectl is None
    assert old.why_not == "in-place resize needs Kubernetes 1.33 or later; its node runs v1.32.9"
    unknown = resize(pod, "resized-container", 800, 800, version="")
    assert unknown is not None and unknown.why_not is not None and "version is unknown" in unknown.why_not
    assert resize(pod, "resized-container", 800, 800, version="v1.33.0").kubectl is not None


def test_the_fixture_pod_keeps_both_the_applied_and_the_asked_resources():
    [c] = resized_pod().containers
    assert (c.request_mcpu, c.limit_mcpu, c.spec_request_mcpu, c.spec_limit_mcpu) == (200, 200, 500, 500)


def test_a_pending_resize_is_read_from_the_pod_conditions_and_from_the_older_status_field():
    from apps.collector.inventory import resize_state

    infeasible = {"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible",
                                  "message": "Node didn't have enough capacity: cpu, requested: 9000, capacity: 2000"}]}  # fmt: skip
    assert resize_state(infeasible) == (
        "Pending (Infeasible)",
        "Node didn't have enough capacity: cpu, requested: 9000, capacity: 2000",
    )
    assert resize_state({"conditions": [{"type": "PodResizeInProgress", "status": "True"}]}) == ("In progress", "")
    assert resize_state({"conditions": [{"type": "PodResizePending", "status": "False"}]}) == ("", "")
    assert resize_state({"resize": "Deferred"}) == ("Pending (Deferred)", "")
    assert resize_state({"conditions": [{"type": "Ready", "status": "True"}]}) == ("", "")
