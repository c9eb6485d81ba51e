"""The thread rules name the knob of the container's runtime: guessed from the image and the pod spec's CPU env vars,
with the value to set, and "runtime unknown" with every common knob when nothing tells it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from apps.advisor.models import Finding
from apps.advisor.rules import advise
from apps.advisor.runtimes import active_processor_count, env_pairs, guess_runtime, thread_knob
from apps.clusters.info import CUT_MARK, MAX_CPU_ENV_CHARS
from apps.clusters.models import Container, Pod
from tests.advisor.test_rules import POLICY, facts, only, window
from tests.builders import build_cluster

NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


# --- the guess


@pytest.mark.parametrize(
    ("image", "runtime", "go_version"),
    [
        ("golang:1.24", "go", (1, 24)),
        ("docker.io/library/golang:1.25.3-alpine@sha256:0123abcd", "go", (1, 25)),
        ("golang:alpine", "go", None),
        ("registry.k8s.io/kube-proxy:v1.34.0", "go", None),  # the tag is the application's version, not Go's
        ("localhost:5000/prometheus", "go", None),
        ("eclipse-temurin:21-jre", "jvm", None),
        ("gcr.io/google-samples/cassandra:v13", "jvm", None),
        ("gcr.io/distroless/java17-debian12", "jvm", None),
        ("mcr.microsoft.com/dotnet/aspnet:8.0", "dotnet", None),
        ("mcr.microsoft.com/dotnet/runtime:8.0", "dotnet", None),
        ("node:22-alpine", "node", None),
        ("registry.k8s.io/node-problem-detector:v0.8", "unknown", None),  # "node" only as the whole name
        ("python:3.13-slim", "python", None),
        ("gcr.io/distroless/python3-debian12", "python", None),
        ("perl:5.34.0", "unknown", None),
        ("mycorp/golang-tools-api:1.24", "unknown", None),
        ("", "unknown", None),
    ],
)
def test_the_image_repository_name_suggests_the_runtime(image: str, runtime: str, go_version: object) -> None:
    guess = guess_runtime(image, {})
    assert (guess.runtime, guess.go_version) == (runtime, go_version)


@pytest.mark.parametrize(
    ("env", "runtime"),
    [
        ({"GOMAXPROCS": "2"}, "go"),
        ({"JDK_JAVA_OPTIONS": "-Xss1m"}, "jvm"),
        ({"_JAVA_OPTIONS": "-Xmx1g"}, "jvm"),
        ({"DOTNET_PROCESSOR_COUNT": "2"}, "dotnet"),
        ({"UV_THREADPOOL_SIZE": "8"}, "node"),
        ({"PYTHON_CPU_COUNT": "2"}, "python"),
    ],
)
def test_without_a_known_image_a_cpu_env_var_tells_the_runtime(env: dict[str, str], runtime: str) -> None:
    assert guess_runtime("mycorp/api:1.2", env).runtime == runtime


def test_a_known_image_wins_over_the_env() -> None:
    assert guess_runtime("python:3.12", {"GOMAXPROCS": "2"}).runtime == "python"


def test_the_last_active_processor_count_of_the_jvm_options_is_the_one_read() -> None:
    env = {"JAVA_TOOL_OPTIONS": "-XX:ActiveProcessorCount=8", "_JAVA_OPTIONS": "-Xmx1g -XX:ActiveProcessorCount=3"}
    assert active_processor_count(env) == ("_JAVA_OPTIONS", "3")
    assert active_processor_count({"JAVA_TOOL_OPTIONS": "-XX:ActiveProcessorCount=8x"}) is None
    # A value cut at the stored bound ends in the cut mark: a flag at its end may be missing digits.
    cut = ("x" * (MAX_CPU_ENV_CHARS - 26)) + " -XX:ActiveProcessorCount=1" + CUT_MARK
    assert active_processor_count({"JAVA_TOOL_OPTIONS": cut}) is None


def test_stored_env_is_read_back_as_sorted_pairs_of_the_known_names_only() -> None:
    raw = {"UV_THREADPOOL_SIZE": "8", "GOMAXPROCS": "2", "PATH": "/bin", "PYTHON_CPU_COUNT": 4, "x" * 9000: "y"}
    assert env_pairs(raw) == (("GOMAXPROCS", "2"), ("UV_THREADPOOL_SIZE", "8"))
    assert env_pairs(["GOMAXPROCS", "2"]) == () and env_pairs(None) == ()
    assert len(env_pairs({"JAVA_TOOL_OPTIONS": "z" * 100_000})[0][1]) == MAX_CPU_ENV_CHARS + 1


def test_a_hostile_image_is_quoted_short_and_printable() -> None:
    text = thread_knob("evil\x1b]0;title\x07/" + "a" * 5000 + "/python:3", {}, cpus=2, purpose="cap")
    assert "\x1b" not in text and "\x07" not in text
    assert text.startswith("The image ") and len(text) < 600


# --- the rules' text


def cut_threads(image: str = "", env: tuple[tuple[str, str], ...] = (), **changes: object) -> str:
    """cut_threads' detail for 200 threads throttled under a 600m limit (the plan's raise sets the cap: 750m → 1)."""
    base = facts(window(ratio=0.5, threads=200, avg=100, p95=150, usage_max=200), image=image, cpu_env=env)
    return only(advise(replace(base, **changes), POLICY), "cut_threads").detail  # type: ignore[arg-type]


def test_an_old_go_image_is_told_to_set_gomaxprocs_to_the_cap() -> None:
    detail = cut_threads("golang:1.24-alpine")
    assert (
        "The image golang:1.24-alpine suggests Go 1.24: Go 1.24 sizes GOMAXPROCS from every CPU of the host" in detail
    )
    assert "set GOMAXPROCS=1 or use go.uber.org/automaxprocs" in detail
    assert "Runtime unknown" not in detail and "-XX:ActiveProcessorCount" not in detail


def test_a_gomaxprocs_set_in_the_pod_spec_is_quoted_with_the_value_to_set() -> None:
    detail = cut_threads("myorg/service:3.1", (("GOMAXPROCS", "16"),))
    assert "GOMAXPROCS in the pod spec suggests Go: GOMAXPROCS is set to 16 in the pod spec; lower it to 1" in detail


def test_go_125_with_a_tighter_pod_limit_is_told_to_set_gomaxprocs_itself() -> None:
    detail = cut_threads("golang:1.25", limit_mcpu=3000, request_mcpu=3000, pod_limit_mcpu=1500)
    # ceil(3,000m) = 3 for the container, but the pod's 1.5 CPUs bind: ceil = 2.
    assert (
        "derives GOMAXPROCS from the container's own CPU limit only and ignores the pod-level limit of 1.5 CPUs "
        "(golang/go#81180), so set GOMAXPROCS=2 explicitly"
    ) in detail
    # Without the pod's limit the default follows the container's: no such sentence.
    assert "pod-level" not in cut_threads("golang:1.25", limit_mcpu=3000, request_mcpu=3000)
    # The plan raises 3,000m to 3,600m: GOMAXPROCS then defaults to 4, the cap itself.
    assert "here 4; that is at most 4 already" in cut_threads("golang:1.25", limit_mcpu=3000, request_mcpu=3000)
    assert "here 2; set GOMAXPROCS=1 to go lower" in cut_threads("golang:1.26")


def test_a_jvm_is_told_its_active_processor_count_and_where_to_set_it() -> None:
    detail = cut_threads("eclipse-temurin:21-jre")
    assert "The image eclipse-temurin:21-jre suggests a JVM" in detail
    assert "add -XX:ActiveProcessorCount=1 in JAVA_TOOL_OPTIONS (or JDK_JAVA_OPTIONS)" in detail
    assert "GOMAXPROCS" not in detail.split("Fewer runnable threads")[0]
    set_already = cut_threads("eclipse-temurin:21-jre", (("JAVA_TOOL_OPTIONS", "-XX:ActiveProcessorCount=8"),))
    assert "-XX:ActiveProcessorCount (in JAVA_TOOL_OPTIONS) is set to 8 in the pod spec; lower it to 1" in set_already


def test_an_unknown_runtime_is_said_so_and_every_common_knob_is_listed() -> None:
    detail = cut_threads("mycorp/api:1.2")
    assert "Runtime unknown (the image mycorp/api:1.2 does not tell it" in detail
    for knob in ("GOMAXPROCS=1", "automaxprocs", "-XX:ActiveProcessorCount=1", "DOTNET_PROCESSOR_COUNT=1",
                 "UV_THREADPOOL_SIZE", "PYTHON_CPU_COUNT=1"):  # fmt: skip
        assert knob in detail
    assert "suggests" not in cut_threads("")  # no image at all: nothing to suggest


def test_add_threads_names_the_runtimes_way_to_use_the_request() -> None:
    one_thread = facts(window(threads=1, usage_max=700), request_mcpu=2000, limit_mcpu=None)
    python = only(advise(replace(one_thread, image="python:3.12"), POLICY), "add_threads").detail
    assert (
        "The image python:3.12 suggests Python: one process runs Python code on one CPU at a time: run 2 worker processes"
        in python
    )
    node = only(
        advise(replace(one_thread, image="node:22", cpu_env=(("UV_THREADPOOL_SIZE", "64"),)), POLICY), "add_threads"
    )
    assert "use 2 processes (cluster) or worker_threads; UV_THREADPOOL_SIZE (set to 64 in the pod spec)" in node.detail
    go = only(advise(replace(one_thread, cpu_env=(("GOMAXPROCS", "1"),)), POLICY), "add_threads").detail
    assert "GOMAXPROCS is set to 1 in the pod spec; raise it to at least 2" in go
    unknown = only(advise(one_thread, POLICY), "add_threads").detail
    assert "Runtime unknown (no image is recorded" in unknown and "GOMAXPROCS of at least 2" in unknown


# --- through the refresh and back


@pytest.mark.django_db
def test_the_stored_advice_names_the_containers_knob_alike_in_every_window_and_in_the_rebuilt_facts() -> None:
    from apps.advisor.facts import thread_knob_text
    from apps.advisor.selectors import container_facts
    from apps.advisor.services import refresh_findings

    cluster = build_cluster("runtimes", minutes=30, step_s=60, now=NOW)
    worker = Container.objects.get(pod__cluster=cluster, pod__name="worker-0")
    worker.image, worker.cpu_env = "golang:1.25", {"GOMAXPROCS": "64", "PATH": "/usr/bin"}
    worker.save()
    # Its neighbour runs Go 1.25 with no GOMAXPROCS, in a pod whose own limit (100m) is below the container's 200m.
    Container.objects.filter(pod__cluster=cluster, pod__name="worker-1").update(image="golang:1.25")
    Pod.objects.filter(cluster=cluster, name__in=["worker-0", "worker-1"]).update(limit_mcpu=100)
    refresh_findings(cluster, now=NOW)

    findings = Finding.objects.filter(container=worker).select_related("container__pod__node")
    details = {f.window: next(r["detail"] for r in f.recommendations if r["kind"] == "cut_threads") for f in findings}
    assert len(details) == 3
    sentences = {
        d.split("Cap the runtime's parallelism at ", 1)[1].split(". Fewer runnable threads")[0]
        for d in details.values()
    }
    assert len(sentences) == 1, sentences
    (sentence,) = sentences
    assert "The image golang:1.25 suggests Go 1.25: GOMAXPROCS is set to 64 in the pod spec; lower it to" in sentence
    rebuilt = container_facts(findings[0])
    assert rebuilt.image == "golang:1.25" and rebuilt.cpu_env == (("GOMAXPROCS", "64"),)
    assert rebuilt.pod_limit_mcpu == 100
    cap = int(sentence.split("lower it to ", 1)[1])
    assert thread_knob_text(rebuilt, cap, "cap") in sentence
    neighbour = Finding.objects.get(container__pod__name="worker-1", container__pod__cluster=cluster, window="1h")
    cut = next(r["detail"] for r in neighbour.recommendations if r["kind"] == "cut_threads")
    assert "ignores the pod-level limit of 0.1 CPUs (golang/go#81180), so set GOMAXPROCS=1 explicitly" in cut
