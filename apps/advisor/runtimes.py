"""Which runtime a container runs, guessed from its image reference and the CPU env vars of its pod spec, and the
sentence naming the knob that sets its parallelism (docs/domain.md#runtime-detection). Pure Python.

An image name is a hint, not a fact (a `golang` image may run anything, an in-house image says nothing), so the
text says what the image or the env *suggests*; with neither, "runtime unknown" and every common knob.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from apps.advisor.versions import GO_CGROUP_GOMAXPROCS
from apps.clusters.info import CPU_ENV_KEYS, MAX_CPU_ENV_CHARS
from apps.clusters.kubelet import MILLI_CPU_TO_CPU
from apps.words import format_number, printable

Runtime = Literal["go", "jvm", "dotnet", "node", "python", "unknown"]
RUNTIMES: tuple[Runtime, ...] = ("go", "jvm", "dotnet", "node", "python", "unknown")
Purpose = Literal["cap", "fill"]  # cut_threads caps the parallelism; add_threads fills a request

RUNTIME_NAMES: dict[str, str] = {
    "go": "Go",
    "jvm": "a JVM",
    "dotnet": ".NET",
    "node": "Node.js",
    "python": "Python",
    "unknown": "runtime unknown",
}
JAVA_OPTION_KEYS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")

# Repository names (the reference's last path component) of base images and of well-known applications.
_IMAGE_NAMES: tuple[tuple[Runtime, str], ...] = (
    ("go", "golang kube-apiserver kube-controller-manager kube-scheduler kube-proxy coredns etcd "
     "kube-state-metrics metrics-server prometheus alertmanager node-exporter pushgateway cluster-autoscaler "
     "kindnetd thanos loki promtail traefik caddy consul vault"),
    ("jvm", "openjdk eclipse-temurin amazoncorretto ibm-semeru-runtimes ibmjava sapmachine zulu-openjdk java "
     "tomcat jetty maven gradle cassandra elasticsearch logstash kafka cp-kafka zookeeper keycloak jenkins solr"),
    ("dotnet", "aspnet"),
    ("node", "node nodejs"),
    ("python", "python pypy"),
)  # fmt: skip
_IMAGE_RUNTIMES: dict[str, Runtime] = {name: runtime for runtime, names in _IMAGE_NAMES for name in names.split()}
# Prefixes of repository names: distroless's java17-debian12, nodejs22-debian12, python3-debian12.
_IMAGE_PREFIXES: tuple[tuple[str, Runtime], ...] = (("java", "jvm"), ("nodejs", "node"), ("python3", "python"))
_ENV_RUNTIMES: tuple[tuple[str, Runtime], ...] = (
    ("GOMAXPROCS", "go"),
    *((key, "jvm") for key in JAVA_OPTION_KEYS),
    ("DOTNET_PROCESSOR_COUNT", "dotnet"),
    ("UV_THREADPOOL_SIZE", "node"),
    ("PYTHON_CPU_COUNT", "python"),
)
_GO_TAG = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})(?![0-9])")
# The flag's value ends at a space or at the end: a value cut to MAX_CPU_ENV_CHARS ends in "…" and is not trusted.
_ACTIVE_PROCESSORS = re.compile(r"(?:^|\s)-XX:ActiveProcessorCount=([0-9]{1,6})(?=\s|$)")
_SHOWN_CHARS = 60


@dataclass(frozen=True, slots=True)
class RuntimeGuess:
    runtime: Runtime
    go_version: tuple[int, int] | None = None  # from a golang image's tag
    basis: str = ""  # what suggests it, for the text ("the image golang:1.24", "GOMAXPROCS in the pod spec")


def env_pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    """A stored env mapping (name → value) as sorted pairs of the known keys with text values, each bounded: what
    the advice reads, whoever stored it."""
    if not isinstance(raw, Mapping):
        return ()
    return tuple(
        sorted(
            (key, value[: MAX_CPU_ENV_CHARS + 1])
            for key, value in raw.items()
            if key in CPU_ENV_KEYS and isinstance(value, str)
        )
    )


def _shown(text: str) -> str:
    text = printable(text)
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}…"


def _repository(image: str) -> tuple[list[str], str]:
    """(path components without the registry, tag) of an image reference, lower case; the digest is dropped."""
    reference = image.strip().lower().split("@", 1)[0]
    path, _, last = reference.rpartition("/")
    name, _, tag = last.partition(":")
    components = [*path.split("/"), name] if path else [name]
    first = components[0]
    if len(components) > 1 and ("." in first or ":" in first or first == "localhost"):
        components = components[1:]  # a registry host: docker.io, registry.k8s.io, localhost:5000
    return components, tag


def guess_runtime(image: str, env: Mapping[str, str]) -> RuntimeGuess:
    """The runtime the image's repository name suggests, else the one a CPU env var of the spec belongs to."""
    if image:
        components, tag = _repository(image)
        name = components[-1]
        runtime = _IMAGE_RUNTIMES.get(name)
        if runtime is None and "dotnet" in components[:-1]:
            runtime = "dotnet"  # mcr.microsoft.com/dotnet/runtime, …/dotnet/aspnet
        if runtime is None:
            runtime = next((r for prefix, r in _IMAGE_PREFIXES if name.startswith(prefix)), None)
        if runtime is not None:
            version = None
            if name == "golang" and (match := _GO_TAG.match(tag)):
                version = (int(match.group(1)), int(match.group(2)))
            return RuntimeGuess(runtime, version, f"the image {_shown(image)}")
    for key, runtime in _ENV_RUNTIMES:
        if key in env:
            return RuntimeGuess(runtime, None, f"{key} in the pod spec")
    return RuntimeGuess("unknown")


def _cpus(mcpu: int) -> int:
    return max(1, math.ceil(mcpu / MILLI_CPU_TO_CPU))


def _cpus_text(mcpu: int) -> str:
    return f"{format_number(mcpu / MILLI_CPU_TO_CPU)} CPU{'' if mcpu == MILLI_CPU_TO_CPU else 's'}"


def thread_knob(
    image: str,
    env: Mapping[str, str],
    *,
    cpus: int,
    purpose: Purpose,
    limit_mcpu: int | None = None,
    pod_limit_mcpu: int | None = None,
) -> str:
    """The sentence (no final stop) that names the knob for the container's runtime with the value to set: at most
    `cpus` threads of parallelism for "cap" (cut_threads), at least `cpus` for "fill" (add_threads)."""
    guess = guess_runtime(image, env)
    if guess.runtime == "unknown":
        told = f"the image {_shown(image)} does not tell it" if image else "no image is recorded"
        return f"Runtime unknown ({told}, nor does a CPU env var in the pod spec): {generic_knobs(cpus, purpose)}"
    if guess.go_version is not None:
        label = f"Go {guess.go_version[0]}.{guess.go_version[1]}"
    else:
        label = RUNTIME_NAMES[guess.runtime]
    knob = _KNOBS[guess.runtime](guess, env, cpus, purpose, limit_mcpu, pod_limit_mcpu)
    return f"{sentence_start(guess.basis)} suggests {label}: {knob}"


def sentence_start(text: str) -> str:
    return text[:1].upper() + text[1:]


def generic_knobs(n: int, purpose: Purpose) -> str:
    if purpose == "cap":
        return (
            f"Go: GOMAXPROCS={n} or go.uber.org/automaxprocs (Go ≥ 1.25 sets it from the CPU limit by itself, rounded "
            f"up, at least 2; older Go uses every host CPU); JVM: -XX:ActiveProcessorCount={n} (JVM ≥ 8u191 reads "
            "the limit, but its pools can still be large); Node.js: UV_THREADPOOL_SIZE (default 4); .NET: "
            f"DOTNET_PROCESSOR_COUNT={n}; Python: os.cpu_count() ignores cgroups, size pools from the limit (3.13+: "
            f"PYTHON_CPU_COUNT={n}); and the application's own worker pool sizes"
        )
    return (
        f"Go: GOMAXPROCS of at least {n}; JVM: -XX:ActiveProcessorCount={n} and pools of {n} workers; .NET: "
        f"DOTNET_PROCESSOR_COUNT={n}; Node.js: {n} processes or worker_threads (JavaScript runs on one thread); "
        f"Python: {n} worker processes (gunicorn --workers {n}); or the application's own worker pool sizes"
    )


def _go(
    guess: RuntimeGuess, env: Mapping[str, str], n: int, purpose: Purpose, limit: int | None, pod_limit: int | None
) -> str:
    set_to = env.get("GOMAXPROCS")
    version = guess.go_version
    aware = version is not None and version >= GO_CGROUP_GOMAXPROCS
    # Go ≥ 1.25 reads only its own (leaf) cgroup: a tighter pod-level limit is ignored (golang/go#81180).
    pod_binds = pod_limit is not None and (limit is None or pod_limit < limit)
    if set_to is not None:
        return _set_knob("GOMAXPROCS", set_to, n, purpose, "blocking system calls, cgo or the application's own")
    if pod_binds and pod_limit is not None and (aware or version is None):
        value = n if purpose == "fill" else min(n, _cpus(pod_limit))
        return (
            f"{'Go' if aware else 'Go ≥ 1.25'} derives GOMAXPROCS from the container's own CPU limit only and ignores "
            f"the pod-level limit of {_cpus_text(pod_limit)} (golang/go#81180), so set GOMAXPROCS={value} "
            f"explicitly{'' if aware else '; older Go uses every host CPU, so set it either way'}"
        )
    if aware:
        if limit is None:
            return (
                "GOMAXPROCS defaults to every CPU of the node (no CPU limit); run the work on at least "
                f"{n} goroutines at once"
            )
        default = max(2, _cpus(limit))
        if purpose == "fill":
            return (
                f"GOMAXPROCS defaults to {default} (the limit rounded up, at least 2); run the work on at least "
                f"{n} goroutines at once"
            )
        lower = f"set GOMAXPROCS={n} to go lower" if default > n else f"that is at most {n} already"
        return (
            f"Go ≥ 1.25 (with go 1.25 or later in go.mod) sets GOMAXPROCS from the CPU limit by itself (rounded up, "
            f"at least 2), here {default}; "
            f"{lower}, and the other threads are blocking system calls, cgo or the application's own"
        )
    if version is None:
        both = (
            "its Go version is unknown: Go ≥ 1.25 sets GOMAXPROCS from the container's CPU limit by itself (rounded "
            "up, at least 2), older Go from every CPU of the host"
        )
        if purpose == "cap":
            return f"{both}; set GOMAXPROCS={n} or use go.uber.org/automaxprocs"
        return f"{both}; make it at least {n} and run the work on that many goroutines at once"
    older = f"Go {version[0]}.{version[1]}"
    if purpose == "cap":
        return (
            f"{older} sizes GOMAXPROCS from every CPU of the host, not the limit: set GOMAXPROCS={n} or use "
            "go.uber.org/automaxprocs (Go ≥ 1.25 follows the container's limit by itself, rounded up, at least 2)"
        )
    return f"{older} sizes GOMAXPROCS from every CPU of the host; run the work on at least {n} goroutines at once"


def _set_knob(name: str, value: str, n: int, purpose: Purpose, others: str) -> str:
    """A knob the pod spec sets: its value, and what to change it to (`others`: what the other threads are)."""
    current = _count(value)
    shown = f"{name} is set to {_shown(value)} in the pod spec"
    if purpose == "cap":
        if current is not None and current <= n:
            return f"{shown}, at most {n} already, so the other threads are {others}"
        return f"{shown}; lower it to {n}"
    if current is not None and current >= n:
        return f"{shown}, enough for {n}: give the work at least {n} threads of its own to run at once"
    return f"{shown}; raise it to at least {n}"


def _count(value: str) -> int | None:
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


def parallelism_knob(env: Mapping[str, str]) -> int | None:
    """The parallelism a runtime's CPU knob in the spec sets (GOMAXPROCS, -XX:ActiveProcessorCount,
    DOTNET_PROCESSOR_COUNT, UV_THREADPOOL_SIZE, PYTHON_CPU_COUNT, the first set in that order); None when none is."""
    jvm = active_processor_count(env)
    for key, runtime in _ENV_RUNTIMES:
        value = (jvm[1] if jvm and jvm[0] == key else None) if runtime == "jvm" else env.get(key)
        if value is not None and (count := _count(value)) is not None:
            return count
    return None


def active_processor_count(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, value) of the -XX:ActiveProcessorCount the spec's JVM options set, the last one winning as the JVM
    reads them (_JAVA_OPTIONS after the launcher's and the tool options)."""
    found = None
    for key in JAVA_OPTION_KEYS:
        matches = _ACTIVE_PROCESSORS.findall(env.get(key, ""))
        if matches:
            found = (key, matches[-1])
    return found


def _jvm(
    guess: RuntimeGuess, env: Mapping[str, str], n: int, purpose: Purpose, limit: int | None, pod_limit: int | None
) -> str:
    flag = f"-XX:ActiveProcessorCount={n}"
    pools = "GC and JIT threads, the common ForkJoinPool and the application's executors"
    current = active_processor_count(env)
    if current is not None:
        key, value = current
        return _set_knob(f"-XX:ActiveProcessorCount (in {key})", value, n, purpose, f"the {pools}")
    given = next((key for key in JAVA_OPTION_KEYS if key in env), None)
    where = f"to the {given} it sets" if given else "in JAVA_TOOL_OPTIONS (or JDK_JAVA_OPTIONS)"
    if purpose == "cap":
        return (
            f"JVMs from 8u191 / 10 count CPUs from the container's limit by themselves, yet the {pools} can still "
            f"outnumber them: add {flag} {where} and cap the application's own pools at {n}"
        )
    return f"add {flag} {where} and size the application's worker pools to {n}"


def _dotnet(
    guess: RuntimeGuess, env: Mapping[str, str], n: int, purpose: Purpose, limit: int | None, pod_limit: int | None
) -> str:
    set_to = env.get("DOTNET_PROCESSOR_COUNT")
    if set_to is not None:
        return _set_knob("DOTNET_PROCESSOR_COUNT", set_to, n, purpose, "the thread pool's and the application's")
    if purpose == "cap":
        return (
            f"set DOTNET_PROCESSOR_COUNT={n} (.NET counts the limit rounded up by itself, but its thread pool grows "
            "past it when work blocks)"
        )
    return f"set DOTNET_PROCESSOR_COUNT={n} or more and give the work as many threads"


def _node(
    guess: RuntimeGuess, env: Mapping[str, str], n: int, purpose: Purpose, limit: int | None, pod_limit: int | None
) -> str:
    set_to = env.get("UV_THREADPOOL_SIZE")
    pool = f"set to {_shown(set_to)} in the pod spec" if set_to is not None else "default 4"
    if purpose == "cap":
        return (
            f"JavaScript runs on one thread; libuv's pool has UV_THREADPOOL_SIZE threads ({pool}): set "
            f"UV_THREADPOOL_SIZE={n}, and count worker_threads and cluster workers against {n} too"
        )
    return (
        f"JavaScript runs on one thread, so use {n} processes (cluster) or worker_threads; UV_THREADPOOL_SIZE "
        f"({pool}) sizes only libuv's pool for file, DNS and crypto work"
    )


def _python(
    guess: RuntimeGuess, env: Mapping[str, str], n: int, purpose: Purpose, limit: int | None, pod_limit: int | None
) -> str:
    set_to = env.get("PYTHON_CPU_COUNT")
    told = f"PYTHON_CPU_COUNT is set to {_shown(set_to)} in the pod spec; " if set_to is not None else ""
    if purpose == "cap":
        return (
            f"{told}os.cpu_count() counts the node's CPUs, not the limit, so size worker counts from the limit: "
            f"gunicorn --workers {n}, pool sizes of {n}; Python 3.13 and later: PYTHON_CPU_COUNT={n} (or "
            f"-X cpu_count={n}) makes os.cpu_count() say {n}"
        )
    return f"{told}one process runs Python code on one CPU at a time: run {n} worker processes (gunicorn --workers {n})"


_KNOBS = {"go": _go, "jvm": _jvm, "dotnet": _dotnet, "node": _node, "python": _python}
