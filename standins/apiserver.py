"""A local stand-in for the Kubernetes API server (and, on request, the kubelets) that plays recorded payloads.

It serves, over plain HTTP on an ephemeral 127.0.0.1 port, the few endpoints cputune reads:

    GET /version
    GET /api/v1/nodes                                   limit / continue paging, fieldSelector
    GET /api/v1/pods                                    (the cluster-wide list, as `kubectl get pods -A`)
    GET /api/v1/nodes/<node>
    GET /api/v1/nodes/<node>/proxy/metrics/cadvisor     the recorded scrape
    GET /api/v1/nodes/<node>/proxy/configz              {"kubeletconfig": {...}}

and, with `kubelet_servers=True`, one small server per node playing its kubelet (`/metrics/cadvisor`, `/configz`);
the node objects then point at them (`InternalIP` 127.0.0.1, `daemonEndpoints.kubeletEndpoint.Port`).

The objects are the real ones of a fixture folder (`nodes.yaml`, `pods.yaml`, `cadvisor.txt`), or any
`ClusterObjects`. `replicas=N` serves N copies of the cluster with renamed nodes, pods, uids and container ids —
the scrapes renamed to match — so a scale benchmark gets thousands of nodes from one recorded one. Objects are kept
as JSON text templates and rendered on request, so 5,000 nodes × 24 pods costs megabytes, not gigabytes.

`Faults` make individual answers go wrong, per test: an expired continue token (410), a node whose scrape answers
an HTTP error, hangs, dribbles, stops short of its Content-Length or returns binary garbage, a slow server. Every
request is recorded with its `Authorization` header, and a wrong or missing bearer token gets a 401 like the real
server.

    with ApiServerStandin("tests/fixtures/clusters/k8s-1.33-minikube") as srv:
        srv.write_kubeconfig(tmp_path / "kubeconfig")
        ...

No configz was captured with the fixtures: the stand-in's kubelet config is shaped like a real kubelet's answer
(kubelet defaults, cgroup driver read from the scrape's cgroup paths) and can be replaced per node.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import ipaddress
import json
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from apps.yaml_input import load_yaml
from standins.http import (
    EXPIRED_MESSAGE,
    PROMETHEUS_TEXT,
    KubernetesHandler,
    ThreadedServer,
    continue_token,
    read_continue_token,
)
from standins.http import write_kubeconfig as _write_kubeconfig

__all__ = ["DEFAULT_TOKEN", "ApiServerStandin", "ClusterObjects", "Faults", "RecordedRequest"]

DEFAULT_TOKEN = "standin-token-not-a-secret"  # noqa: S105 - a fixed fake token the stand-in checks
MAX_KUBELET_SERVERS = 256  # one listening thread each: enough for tests, not meant for scale runs
RESOURCE_VERSION = "4242"
_PLACEHOLDER = re.compile(r'"@@standin:([A-Za-z0-9_]+)@@"')
_DASHLESS_UID = re.compile(r"^[0-9a-f]{32}$")
_UUID_NAMESPACE = uuid.UUID("6f1d8c2e-3b0a-4c55-9a51-3c0a1ed2c0de")
_PROMETHEUS_TEXT = PROMETHEUS_TEXT
_EXPIRED_MESSAGE = EXPIRED_MESSAGE
_GARBAGE = bytes(range(256)) * 64  # not UTF-8, full of NULs: what a confused proxy or a wrong port may answer


@dataclass
class Faults:
    """What goes wrong, keyed by node name (as served, i.e. after renaming) or by resource ("nodes", "pods").

    Faults are read on every request, so a test may change them while the server runs.
    """

    expired_continues: dict[str, int] = field(default_factory=dict)  # resource → continued requests answering 410
    scrape_status: dict[str, int] = field(default_factory=dict)  # node → HTTP status of its cAdvisor scrape
    configz_status: dict[str, int] = field(default_factory=dict)  # node → HTTP status of its configz
    hang_s: dict[str, float] = field(default_factory=dict)  # node → seconds its scrape/configz wait before answering
    drip_s: dict[str, float] = field(default_factory=dict)  # node → seconds its scrape body is dribbled over
    # node → bytes of its scrape sent before the connection drops, while the Content-Length promises all of it
    cut_after_bytes: dict[str, int] = field(default_factory=dict)
    garbage: set[str] = field(default_factory=set)  # nodes whose scrape answers binary bytes
    garbage_content_type: str = _PROMETHEUS_TEXT  # what those binary answers claim to be
    delay_s: float = 0.0  # every answer waits this long: a slow API server


@dataclass
class ClusterObjects:
    """What the stand-in serves: Node and Pod objects as the API returns them, scrapes and kubelet configs."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    scrapes: dict[str, bytes] = field(default_factory=dict)  # node name → its /metrics/cadvisor text
    kubelet_configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # node name → kubeletconfig

    @classmethod
    def from_fixture(cls, folder: str | Path) -> ClusterObjects:
        """Read `nodes.yaml`, `pods.yaml` and `cadvisor.txt` (the scrape of the folder's single node;
        with several nodes, `cadvisor-<node>.txt` per node) from a fixture folder."""
        folder = Path(folder)
        nodes = _items(_load(folder / "nodes.yaml"), folder / "nodes.yaml")
        pods = _items(_load(folder / "pods.yaml"), folder / "pods.yaml")
        scrapes: dict[str, bytes] = {}
        names = [node["metadata"]["name"] for node in nodes]
        for name in names:
            own = folder / f"cadvisor-{name}.txt"
            if own.exists():
                scrapes[name] = own.read_bytes()
        if len(names) == 1 and not scrapes and (folder / "cadvisor.txt").exists():
            scrapes[names[0]] = (folder / "cadvisor.txt").read_bytes()
        return cls(nodes=nodes, pods=pods, scrapes=scrapes)


@dataclass(frozen=True)
class RecordedRequest:
    server: str  # "api", or "kubelet/<node>" for a node's kubelet server
    method: str
    path: str
    query: dict[str, str]
    authorization: str
    at: float  # time.monotonic()


class ApiServerStandin:
    """The stand-in server. Use as a context manager; `url` is its base URL once started."""

    def __init__(
        self,
        cluster: str | Path | ClusterObjects,
        faults: Faults | None = None,
        *,
        replicas: int = 1,
        token: str = DEFAULT_TOKEN,
        kubelet_servers: bool = False,
        gzip_scrapes: bool = False,
    ) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {replicas}")
        objects = cluster if isinstance(cluster, ClusterObjects) else ClusterObjects.from_fixture(cluster)
        if kubelet_servers and len(objects.nodes) * replicas > MAX_KUBELET_SERVERS:
            raise ValueError(
                f"kubelet_servers starts one server per node; {len(objects.nodes) * replicas} nodes is more than "
                f"{MAX_KUBELET_SERVERS}"
            )
        self.faults = faults if faults is not None else Faults()
        self.token = token
        self.gzip_scrapes = gzip_scrapes
        self._kubelet_servers_wanted = kubelet_servers
        self._catalog = _Catalog(objects, replicas)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._api: _Server | None = None
        self._kubelets: dict[str, _Server] = {}
        self._threads: list[threading.Thread] = []

    # -- lifecycle

    def start(self) -> ApiServerStandin:
        """Bind and serve (API server, then kubelets when asked). Idempotent."""
        if self._api is not None:
            return self
        self._stopping.clear()
        self._api = self._serve("api", None)
        if self._kubelet_servers_wanted:
            for name in self._catalog.node_names:
                self._kubelets[name] = self._serve(f"kubelet/{name}", name)
            self._catalog.kubelet_ports = {name: server.server_address[1] for name, server in self._kubelets.items()}
        return self

    def stop(self) -> None:
        """Stop serving; hanging and dribbling answers are cut short rather than waited for."""
        self._stopping.set()
        servers = [server for server in (self._api, *self._kubelets.values()) if server is not None]
        for server in servers:
            server.shutdown()
            server.server_close()
            server.close_connections()
        for thread in self._threads:
            thread.join(timeout=5)
        self._api = None
        self._kubelets = {}
        self._threads = []
        self._catalog.kubelet_ports = {}

    def __enter__(self) -> ApiServerStandin:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # -- what tests look at

    @property
    def url(self) -> str:
        if self._api is None:
            raise RuntimeError("the stand-in is not running: use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._api.server_address[1]}"

    @property
    def node_names(self) -> list[str]:
        return list(self._catalog.node_names)

    @property
    def kubelet_ports(self) -> dict[str, int]:
        return dict(self._catalog.kubelet_ports)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str, server: str = "api") -> list[RecordedRequest]:
        """The recorded requests for one path (without query) on one server ("api" or "kubelet/<node>")."""
        return [r for r in self.requests if r.path == path and r.server == server]

    def scrape_of(self, node: str) -> bytes:
        """The scrape text served for a node (renamed for replicas)."""
        scrape = self._catalog.scrape(node)
        if scrape is None:
            raise KeyError(f"no scrape for node {node!r}")
        return scrape

    def write_kubeconfig(self, path: str | Path, token: str | None = None) -> Path:
        """Write a kubeconfig pointing at this server (plain http) with a bearer token; returns the path."""
        return _write_kubeconfig(path, self.url, self.token if token is None else token)

    # -- internals

    def _serve(self, role: str, node: str | None) -> _Server:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.standin = self
        server.role = role
        server.node = node
        thread = threading.Thread(target=server.serve_forever, name=f"standin-{role}", daemon=True)
        thread.start()
        self._threads.append(thread)
        return server

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)


# ------------------------------------------------------------------------------------------------- HTTP plumbing


class _Server(ThreadedServer):
    standin: ApiServerStandin
    role: str
    node: str | None


class _Handler(KubernetesHandler):
    server: _Server

    def do_GET(self) -> None:
        standin = self.server.standin
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        authorization = self.headers.get("Authorization", "")
        standin._record(RecordedRequest(self.server.role, "GET", path, query, authorization, time.monotonic()))
        faults = standin.faults
        if faults.delay_s and standin._stopping.wait(faults.delay_s):
            return
        if authorization != f"Bearer {standin.token}":
            self._status(401, "Unauthorized", "Unauthorized")
            return
        try:
            if self.server.node is not None:
                self._kubelet(self.server.node, path)
            else:
                self._api(path, query)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): nothing to answer
            return

    # -- API server

    def _api(self, path: str, query: dict[str, str]) -> None:
        catalog = self.server.standin._catalog
        if path == "/version":
            self._json(200, catalog.version())
            return
        if path in ("/api/v1/nodes", "/api/v1/pods"):
            self._list(path.rsplit("/", 1)[1], query)
            return
        match = re.fullmatch(r"/api/v1/nodes/([^/]+)(?:/proxy(/.*))?", path)
        if match is None:
            self._status(404, "NotFound", f"the server could not find the requested resource (get {path})")
            return
        node, proxied = match.group(1), match.group(2)
        if not catalog.has_node(node):
            self._status(404, "NotFound", f'nodes "{node}" not found')
            return
        if proxied is None:
            self._raw(200, "application/json", catalog.node_json(node).encode())
        else:
            self._kubelet(node, proxied)

    def _list(self, resource: str, query: dict[str, str]) -> None:
        standin = self.server.standin
        catalog = standin._catalog
        selector = query.get("fieldSelector", "")
        try:
            predicate = catalog.selector(resource, selector)
        except ValueError as error:
            self._status(400, "BadRequest", str(error))
            return
        limit_text = query.get("limit", "")
        limit = int(limit_text) if limit_text.isdigit() else 0
        start = 0
        token = query.get("continue", "")
        if token:
            with standin._lock:
                expiring = standin.faults.expired_continues.get(resource, 0)
                if expiring > 0:
                    standin.faults.expired_continues[resource] = expiring - 1
            if expiring > 0:
                fresh = _continue_token(resource, selector, 0)
                self._status(410, "Expired", _EXPIRED_MESSAGE, metadata={"continue": fresh})
                return
            try:
                start = _read_continue_token(token, resource, selector)
            except ValueError as error:
                self._status(400, "BadRequest", f"invalid continue token: {error}")
                return
        items, next_index, remaining = catalog.page(resource, predicate, start, limit)
        metadata: dict[str, Any] = {"resourceVersion": RESOURCE_VERSION}
        if next_index is not None:
            metadata["continue"] = _continue_token(resource, selector, next_index)
            if remaining is not None and not selector:  # as the real server: unknown (omitted) under a selector
                metadata["remainingItemCount"] = remaining
        head = json.dumps({"kind": f"{resource[:-1].capitalize()}List", "apiVersion": "v1", "metadata": metadata})
        body = head[:-1] + ',"items":[' + ",".join(items) + "]}"
        self._raw(200, "application/json", body.encode())

    # -- kubelet (through the API server proxy, or a node's own kubelet server)

    def _kubelet(self, node: str, path: str) -> None:
        standin = self.server.standin
        faults = standin.faults
        if path in ("/metrics/cadvisor", "/configz"):
            hang = faults.hang_s.get(node, 0.0)
            if hang and standin._stopping.wait(hang):
                return
        if path == "/metrics/cadvisor":
            self._scrape(node)
        elif path == "/configz":
            status = faults.configz_status.get(node)
            if status is not None:
                self._raw(status, "text/plain; charset=utf-8", f"configz: stand-in answers {status}\n".encode())
                return
            self._json(200, {"kubeletconfig": standin._catalog.kubelet_config(node)})
        else:
            self._raw(404, "text/plain; charset=utf-8", b"404 page not found\n")

    def _scrape(self, node: str) -> None:
        standin = self.server.standin
        faults = standin.faults
        status = faults.scrape_status.get(node)
        if status is not None:
            body = f'Internal Error: failed to get cadvisor stats for node "{node}" (stand-in fault {status})\n'
            self._raw(status, "text/plain; charset=utf-8", body.encode())
            return
        if node in faults.garbage:
            self._raw(200, faults.garbage_content_type, _GARBAGE)
            return
        scrape = standin._catalog.scrape(node)
        if scrape is None:
            self._raw(404, "text/plain; charset=utf-8", b"404 page not found\n")
            return
        headers = {}
        if standin.gzip_scrapes and "gzip" in self.headers.get("Accept-Encoding", ""):
            scrape = gzip.compress(scrape, compresslevel=1)
            headers["Content-Encoding"] = "gzip"
        cut = faults.cut_after_bytes.get(node)
        if cut is not None:
            self._cut_short(_PROMETHEUS_TEXT, scrape, cut, headers)
            return
        drip = faults.drip_s.get(node, 0.0)
        if drip:
            self._dribble(_PROMETHEUS_TEXT, scrape, drip, headers)
        else:
            self._raw(200, _PROMETHEUS_TEXT, scrape, headers)

    # -- answers

    def _cut_short(self, content_type: str, body: bytes, sent_bytes: int, headers: Mapping[str, str]) -> None:
        """Promise the whole body, send its first `sent_bytes`, then drop the connection (a kubelet or proxy dying)."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body[:sent_bytes])
        self.wfile.flush()
        self.close_connection = True

    def _dribble(self, content_type: str, body: bytes, seconds: float, headers: Mapping[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        pieces = 20
        size = max(1, -(-len(body) // pieces))
        for offset in range(0, len(body), size):
            self.wfile.write(body[offset : offset + size])
            self.wfile.flush()
            if self.server.standin._stopping.wait(seconds / pieces):
                return


def _continue_token(resource: str, selector: str, start: int) -> str:
    return continue_token({"resource": resource, "selector": selector, "start": start, "rv": RESOURCE_VERSION})


def _read_continue_token(token: str, resource: str, selector: str) -> int:
    return int(read_continue_token(token, {"resource": resource, "selector": selector})["start"])


# ---------------------------------------------------------------------------------------------- the object catalog


class _Template:
    """An object as compact JSON text with named holes, rendered by filling the holes with JSON values."""

    def __init__(self, obj: Any) -> None:
        parts = _PLACEHOLDER.split(json.dumps(obj, separators=(",", ":")))
        self._text = parts[0::2]
        self._keys = parts[1::2]

    def render(self, values: Mapping[str, Any]) -> str:
        out = [self._text[0]]
        for key, text in zip(self._keys, self._text[1:], strict=True):
            out.append(json.dumps(values[key]))
            out.append(text)
        return "".join(out)


def _hole(key: str) -> str:
    return f"@@standin:{key}@@"


@dataclass
class _PodTemplate:
    template: _Template
    name: str
    namespace: str
    uid: str
    node: str
    phase: str
    mirror_hash: str
    container_ids: list[str]  # as in the status, with the runtime prefix


@dataclass
class _NodeTemplate:
    template: _Template
    name: str
    uid: str
    address: str
    port: int
    scrape: _ScrapeTemplate | None
    kubelet_config: dict[str, Any]


class _ScrapeTemplate:
    """A scrape whose pod name labels, pod uids and container ids are renamed per replica.

    One pass of a character-class pattern finds every candidate token (much faster than an alternation of the
    literal names); tokens that belong to no pod of the node (sandbox ids, cgroup hashes) are kept as they are.
    The split is made on the first replica render only: a one-replica stand-in serves the recorded bytes.
    """

    _CANDIDATE = re.compile(
        r'(pod(?:_name)?="[^"]*"'  # pod name labels
        r"|[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}(?![0-9a-f])"  # pod uids
        r"|(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])"  # container ids
        r"|(?<=pod)[0-9a-f]{32}(?![0-9a-f]))"  # static pods' config hash after "pod" (whose d is a hex digit)
    )

    def __init__(self, raw: bytes, pods: list[_PodTemplate]) -> None:
        tokens: dict[str, tuple[str, str]] = {}  # token → (what, original value)
        for pod in pods:
            for label in ("pod", "pod_name"):
                tokens[f'{label}="{pod.name}"'] = (label, pod.name)
            if pod.uid:
                tokens[pod.uid] = ("uid", pod.uid)
                tokens[pod.uid.replace("-", "_")] = ("uid_", pod.uid)  # systemd slice names
            if pod.mirror_hash:
                tokens[pod.mirror_hash] = ("uid", pod.mirror_hash)
            for container_id in pod.container_ids:
                bare = container_id.split("://", 1)[-1]
                if bare:
                    tokens[bare] = ("cid", bare)
        self._tokens = tokens
        # Any bytes are served as given, hostile ones too (not UTF-8, binary): surrogateescape round-trips them.
        self._text = raw.decode("utf-8", "surrogateescape")
        self._original = raw
        self._parts: list[str] | None = None
        self._lock = threading.Lock()

    def render(self, replica: int, replicas: int) -> bytes:
        if replicas == 1:
            return self._original
        with self._lock:
            if self._parts is None:
                self._parts = self._CANDIDATE.split(self._text)
        renamed: dict[str, str] = {}
        for token, (what, original) in self._tokens.items():
            if what in ("pod", "pod_name"):
                renamed[token] = f'{what}="{_replica_name(original, replica, replicas)}"'
            elif what == "uid":
                renamed[token] = _replica_uid(original, replica)
            elif what == "uid_":
                renamed[token] = _replica_uid(original, replica).replace("-", "_")
            else:
                renamed[token] = _replica_container_id(original, replica)
        parts = self._parts
        out = [renamed.get(part, part) if index % 2 else part for index, part in enumerate(parts)]
        return "".join(out).encode("utf-8", "surrogateescape")


class _Catalog:
    """The served objects: templates × replicas, addressed by list index (replica-major) or by node name."""

    def __init__(self, objects: ClusterObjects, replicas: int) -> None:
        self.replicas = replicas
        self.kubelet_ports: dict[str, int] = {}
        self._pods = [_pod_template(pod) for pod in objects.pods]
        pods_by_node: dict[str, list[_PodTemplate]] = {}
        for pod in self._pods:
            pods_by_node.setdefault(pod.node, []).append(pod)
        self._nodes = [
            _node_template(node, objects.scrapes, objects.kubelet_configs, pods_by_node) for node in objects.nodes
        ]
        self.node_names = [
            _replica_name(node.name, replica, replicas) for replica in range(replicas) for node in self._nodes
        ]
        self._node_index = {name: index for index, name in enumerate(self.node_names)}
        first = objects.nodes[0] if objects.nodes else {}
        self._kubelet_version = str(first.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "v1.33.0"))

    # -- lookups

    def has_node(self, name: str) -> bool:
        return name in self._node_index

    def _node_at(self, name: str) -> tuple[int, _NodeTemplate]:
        index = self._node_index[name]
        return index // len(self._nodes), self._nodes[index % len(self._nodes)]

    def node_json(self, name: str) -> str:
        replica, node = self._node_at(name)
        return node.template.render(self._node_values(node, replica))

    def scrape(self, name: str) -> bytes | None:
        if name not in self._node_index:
            return None
        replica, node = self._node_at(name)
        return node.scrape.render(replica, self.replicas) if node.scrape is not None else None

    def kubelet_config(self, name: str) -> dict[str, Any]:
        return self._node_at(name)[1].kubelet_config

    def version(self) -> dict[str, str]:
        match = re.match(r"v(\d+)\.(\d+)", self._kubelet_version)
        major, minor = match.groups() if match else ("1", "33")
        return {"major": major, "minor": minor, "gitVersion": self._kubelet_version, "platform": "linux/amd64"}

    # -- lists

    def selector(self, resource: str, selector: str) -> Any:
        """A predicate (template, replica) → bool for the fieldSelector terms the real server supports here."""
        terms: list[tuple[str, bool, str]] = []
        for term in filter(None, (t.strip() for t in selector.split(","))):
            match = re.fullmatch(r"([A-Za-z.]+)\s*(!=|==|=)\s*(.*)", term)
            if match is None:
                raise ValueError(f"invalid field selector term {term!r}")
            field_name, operator, value = match.groups()
            allowed = {"metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"}
            if resource == "nodes":
                allowed = {"metadata.name"}
            if field_name not in allowed:
                raise ValueError(f'field label not supported: "{field_name}"')
            terms.append((field_name, operator == "!=", value))

        def predicate(template: Any, replica: int) -> bool:
            for field_name, negate, value in terms:
                if field_name == "metadata.name":
                    actual = _replica_name(template.name, replica, self.replicas)
                elif field_name == "metadata.namespace":
                    actual = template.namespace
                elif field_name == "status.phase":
                    actual = template.phase
                else:
                    actual = _replica_name(template.node, replica, self.replicas) if template.node else ""
                if (actual == value) == negate:
                    return False
            return True

        return predicate

    def page(self, resource: str, predicate: Any, start: int, limit: int) -> tuple[list[str], int | None, int | None]:
        """Items from list index `start` on, at most `limit` (0: all); the next index, and items left when known."""
        templates: list[Any] = self._nodes if resource == "nodes" else self._pods
        total = len(templates) * self.replicas
        items: list[str] = []
        index = start
        while index < total and (limit == 0 or len(items) < limit):
            replica, template = divmod(index, len(templates))
            chosen = templates[template]
            if predicate(chosen, replica):
                values = (
                    self._node_values(chosen, replica) if resource == "nodes" else self._pod_values(chosen, replica)
                )
                items.append(chosen.template.render(values))
            index += 1
        if index >= total:
            return items, None, None
        return items, index, total - index

    # -- renaming

    def _node_values(self, node: _NodeTemplate, replica: int) -> dict[str, Any]:
        name = _replica_name(node.name, replica, self.replicas)
        address, port = node.address, node.port
        if name in self.kubelet_ports:
            address, port = "127.0.0.1", self.kubelet_ports[name]
        elif self.replicas > 1:
            position = replica * len(self._nodes) + self._nodes.index(node)
            address = str(ipaddress.IPv4Address(int(ipaddress.IPv4Address("10.128.0.0")) + position + 1))
        uid = _replica_uid(node.uid, replica) if self.replicas > 1 else node.uid
        return {"name": name, "uid": uid, "address": address, "port": port}

    def _pod_values(self, pod: _PodTemplate, replica: int) -> dict[str, Any]:
        if self.replicas == 1:
            values: dict[str, Any] = {"name": pod.name, "uid": pod.uid, "node": pod.node, "hash": pod.mirror_hash}
            values.update({f"cid{i}": cid for i, cid in enumerate(pod.container_ids)})
            return values
        values = {
            "name": _replica_name(pod.name, replica, self.replicas),
            "uid": _replica_uid(pod.uid, replica),
            "node": _replica_name(pod.node, replica, self.replicas) if pod.node else "",
            "hash": _replica_uid(pod.mirror_hash, replica) if pod.mirror_hash else "",
        }
        for i, cid in enumerate(pod.container_ids):
            runtime, _, bare = cid.rpartition("://")
            values[f"cid{i}"] = f"{runtime}://{_replica_container_id(bare, replica)}" if runtime else cid
        return values


def _pod_template(pod: dict[str, Any]) -> _PodTemplate:
    obj = json.loads(json.dumps(pod))  # a deep copy (the object becomes JSON anyway), 5× faster
    metadata = obj.setdefault("metadata", {})
    spec = obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    name, uid, node = str(metadata.get("name", "")), str(metadata.get("uid", "")), str(spec.get("nodeName", ""))
    metadata["name"] = _hole("name")
    if uid:
        metadata["uid"] = _hole("uid")
    if node:
        spec["nodeName"] = _hole("node")
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == "Node" and ref.get("name") == node:
            ref["name"] = _hole("node")
    annotations = metadata.get("annotations") or {}
    mirror_hash = str(annotations.get("kubernetes.io/config.mirror", ""))
    for key in ("kubernetes.io/config.mirror", "kubernetes.io/config.hash"):
        if mirror_hash and annotations.get(key) == mirror_hash:
            annotations[key] = _hole("hash")
    container_ids: list[str] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            if container.get("containerID"):
                container_ids.append(str(container["containerID"]))
                container["containerID"] = _hole(f"cid{len(container_ids) - 1}")
    return _PodTemplate(
        template=_Template(obj),
        name=name,
        namespace=str(metadata.get("namespace", "")),
        uid=uid,
        node=node,
        phase=str(status.get("phase", "")),
        mirror_hash=mirror_hash,
        container_ids=container_ids,
    )


def _node_template(
    node: dict[str, Any],
    scrapes: Mapping[str, bytes],
    kubelet_configs: Mapping[str, dict[str, Any]],
    pods_by_node: Mapping[str, list[_PodTemplate]],
) -> _NodeTemplate:
    obj = copy.deepcopy(node)
    metadata = obj.setdefault("metadata", {})
    status = obj.setdefault("status", {})
    name, uid = str(metadata.get("name", "")), str(metadata.get("uid", ""))
    metadata["name"] = _hole("name")
    metadata["uid"] = _hole("uid")
    labels = metadata.get("labels") or {}
    for key, value in list(labels.items()):
        if value == name:
            labels[key] = _hole("name")
    address = ""
    addresses = status.setdefault("addresses", [])
    for entry in addresses:
        if entry.get("type") == "InternalIP" and not address:
            address = str(entry.get("address", ""))
            entry["address"] = _hole("address")
        elif entry.get("type") == "Hostname" and entry.get("address") == name:
            entry["address"] = _hole("name")
    endpoint = status.setdefault("daemonEndpoints", {}).setdefault("kubeletEndpoint", {})
    port = int(endpoint.get("Port") or 10250)
    endpoint["Port"] = _hole("port")
    raw = scrapes.get(name)
    scrape = _ScrapeTemplate(raw, pods_by_node.get(name, [])) if raw is not None else None
    config = kubelet_configs.get(name) or _default_kubelet_config(raw)
    return _NodeTemplate(_Template(obj), name, uid, address, port, scrape, config)


def _default_kubelet_config(scrape: bytes | None) -> dict[str, Any]:
    """A kubelet's configz `kubeletconfig` with its documented defaults; the cgroup driver read from the scrape."""
    systemd = scrape is not None and b"kubepods.slice" in scrape
    return {
        "enableServer": True,
        "staticPodPath": "/etc/kubernetes/manifests",
        "port": 10250,
        "cgroupsPerQOS": True,
        "cgroupDriver": "systemd" if systemd else "cgroupfs",
        "cpuManagerPolicy": "none",
        "cpuManagerReconcilePeriod": "10s",
        "topologyManagerPolicy": "none",
        "cpuCFSQuota": True,
        "cpuCFSQuotaPeriod": "100ms",
        "maxPods": 110,
    }


def _replica_name(name: str, replica: int, replicas: int) -> str:
    return name if replicas == 1 else f"{name}-{replica:05d}"


def _replica_uid(uid: str, replica: int) -> str:
    """A stable new uid for a replica, in the original's format (dashed UUID, or a static pod's 32-hex hash)."""
    new = uuid.uuid5(_UUID_NAMESPACE, f"{uid}/{replica}")
    return new.hex if _DASHLESS_UID.match(uid) else str(new)


def _replica_container_id(container_id: str, replica: int) -> str:
    return hashlib.sha256(f"{container_id}/{replica}".encode()).hexdigest()[: len(container_id) or 64]


def _load(path: Path) -> Any:
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)
    return load_yaml(text)


def _items(document: Any, path: Path) -> list[dict[str, Any]]:
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"{path} is not a Kubernetes list (no `items`)")
    return items
