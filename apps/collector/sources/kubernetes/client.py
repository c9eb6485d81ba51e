"""The Kubernetes source's client: nodes and pods from the API server, and per node the kubelet's cAdvisor scrape and
(opt-in) its kubelet configuration. Built on the official `kubernetes` client; only this module imports it.

Permissions (read-only ClusterRole):
- `list` on `nodes` and `pods` for the inventory;
- `get` on `nodes/proxy` for scrapes through the API server (the default), or only `get` on `nodes/metrics` with
  `kubelet_direct=True`, which talks to each kubelet's port 10250 with the same credentials;
- `get` on `nodes/proxy` for `kubelet_config()` (`read_kubelet_config=True`) in either mode — see its docstring.

Lists are read in pages (`limit` / `continue`) with `_preload_content=False` and parsed as plain JSON: the client's
model deserializer is several times slower than `json.loads`, and the inventory reads plain dicts anyway.

Timeouts are per request, body included: a kubelet that hangs or dribbles its scrape costs at most
`request_timeout_s` (plus one socket read) and raises NodeScrapeError for that node only. Read timeouts are not
retried — the next collection cycle is the retry — so a hanging node never holds a worker for several timeouts.

Sizes are bounded as the scrape streams in: a line longer than MAX_SCRAPE_LINE_BYTES is cut to that length on
arrival (the parser then refuses it by line number and keeps the rest), and a scrape that would keep more than
MAX_SCRAPE_BYTES is refused whole. The body is held once, never copied to join or to check its encoding, so a node's
read costs about the size of its scrape (tests/collector/test_hostile_input.py holds it to that).
"""

from __future__ import annotations

import copy
import io
import ipaddress
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from apps.collector import inventory
from apps.collector.cadvisor import MAX_LINE_BYTES
from apps.collector.sources.base import NodeScrapeError, SourceError
from apps.collector.sources.kubernetes.convert import check_metrics_text, error_text, json_object
from apps.telemetry.readings import NodeInfo, PodInfo

__all__ = ["KubernetesSource", "kubelet_base_url"]

_Item = TypeVar("_Item")

logger = logging.getLogger(__name__)

# One retry for a refused or reset connection; none for read timeouts or HTTP statuses (see the module docstring).
_RETRIES = urllib3.Retry(total=1, connect=1, read=0, status=0, redirect=0, other=0)
_CHUNK_BYTES = 256 * 1024
# A scrape costs tens of KB per pod, so a few MB at the default maxPods of 110. 64 MiB leaves room for large nodes and
# pods of many containers, and stops a runaway answer before it costs a worker much more than that (held once).
MAX_SCRAPE_BYTES = 64 * 1024 * 1024
# Lines are cut to this on arrival: twice what the parser reads, so it still sees the line as too long and names it.
MAX_SCRAPE_LINE_BYTES = 2 * MAX_LINE_BYTES
# Bytes received (after gzip) before giving up, cut ones included: endless lines are not read for ever either.
MAX_SCRAPE_RECEIVED_BYTES = 4 * MAX_SCRAPE_BYTES
MAX_LIST_PAGE_BYTES = 512 * 1024 * 1024
MAX_PROBLEM_CHARS = 2000  # an object's problem quotes its names, which a broken object may make megabytes long
_FINISHED_PODS = "status.phase!=Succeeded,status.phase!=Failed"
_SCRAPE_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
_TEXT_TYPES = ("text/", "application/openmetrics-text")


def kubelet_base_url(address: str, port: int = inventory.DEFAULT_KUBELET_PORT, scheme: str = "https") -> str:
    """`https://10.0.0.5:10250`, with IPv6 addresses bracketed (`https://[fd00::5]:10250`)."""
    try:
        host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:  # a DNS name
        host = address
    return f"{scheme}://{host}:{port}"


class KubernetesSource:
    """Reads one cluster through its API server. Thread-safe: one instance may serve several workers."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        in_cluster: bool = False,
        kubelet_direct: bool = False,
        read_kubelet_config: bool = False,
        request_timeout_s: float = 20,
        page_size: int = 500,
        *,
        kubelet_scheme: str = "https",
        kubelet_port: int | None = None,
        kubelet_insecure_skip_tls_verify: bool = False,
        skip_finished_pods: bool = True,
    ) -> None:
        """Load credentials from a kubeconfig (its current context unless `context`), or the pod's service account
        with `in_cluster`. `kubelet_port` overrides the port the node reports; `kubelet_scheme` is "https" except
        in tests; `skip_finished_pods` leaves Succeeded/Failed pods (no cgroups left to read) out of `list_pods()`.

        Raises SourceError when the credentials cannot be loaded, ValueError for nonsensical settings.
        """
        if in_cluster and (kubeconfig or context):
            raise ValueError("in_cluster uses the pod's service account: give no kubeconfig or context with it")
        if request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be positive, got {request_timeout_s}")
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, got {page_size}")
        if kubelet_scheme not in ("https", "http"):
            raise ValueError(f"kubelet_scheme must be https or http, got {kubelet_scheme!r}")
        self.kubelet_direct = kubelet_direct
        self.read_kubelet_config = read_kubelet_config
        self.request_timeout_s = float(request_timeout_s)
        self.page_size = page_size
        self.skip_finished_pods = skip_finished_pods
        self._kubelet_scheme = kubelet_scheme
        self._kubelet_port = kubelet_port
        self._api_client = _connect(kubeconfig, context, in_cluster)
        self.server: str = self._api_client.configuration.host
        self._core = k8s_client.CoreV1Api(self._api_client)
        self._kubelet_client = (
            _kubelet_client(self._api_client.configuration, kubelet_insecure_skip_tls_verify)
            if kubelet_direct
            else None
        )
        self._kubelet_endpoints: dict[str, tuple[str, int]] = {}

    def close(self) -> None:
        """Release the connection pools."""
        self._api_client.close()
        if self._kubelet_client is not None:
            self._kubelet_client.close()

    def __enter__(self) -> KubernetesSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- inventory

    def list_nodes(self) -> tuple[list[NodeInfo], list[str]]:
        """Every node, cluster-wide, in pages; plus one problem string per node that could not be read.

        Raises SourceError when the list itself fails (HTTP error, timeout, a continue token expiring twice).
        """

        def convert(objects: list[Mapping[str, Any]]) -> tuple[list[NodeInfo], list[str]]:
            for node in objects:
                name = node.get("metadata", {}).get("name") if isinstance(node.get("metadata"), Mapping) else None
                endpoint = inventory.kubelet_endpoint(node)
                if isinstance(name, str) and endpoint is not None:
                    self._kubelet_endpoints[name] = endpoint
            return inventory.nodes_from_objects(objects)

        return self._list("nodes", self._core.list_node, convert)

    def list_pods(self) -> tuple[list[PodInfo], list[str]]:
        """Every pod of every namespace (running and pending ones unless `skip_finished_pods` is off), in pages.

        Raises SourceError as `list_nodes` does.
        """
        selector = _FINISHED_PODS if self.skip_finished_pods else None
        return self._list(
            "pods", self._core.list_pod_for_all_namespaces, inventory.pods_from_objects, field_selector=selector
        )

    # -- per node

    def scrape_cadvisor(self, node_name: str) -> bytes:
        """The node's `/metrics/cadvisor` text (Prometheus exposition format), through the API server's node proxy,
        or straight from the kubelet with `kubelet_direct`. Lines longer than MAX_SCRAPE_LINE_BYTES come back cut to
        that length (the parser refuses them by line number).

        Raises NodeScrapeError naming the node for a timeout, a refused connection, an HTTP error status, an answer
        larger than MAX_SCRAPE_BYTES, or one that is not metrics text (wrong content type, binary bytes, not UTF-8
        — as Prometheus, which fails such a scrape too —, empty).
        """
        client, host, path = self._kubelet_route(node_name, "metrics/cadvisor")
        status, content_type, body = self._get(
            node_name, client, host, path, _SCRAPE_ACCEPT, MAX_SCRAPE_BYTES, _LongLines(MAX_SCRAPE_LINE_BYTES)
        )
        if status != 200:
            raise NodeScrapeError(node_name, f"GET {host}{path} answered HTTP {status}: {error_text(body)}", status)
        if not content_type.lower().startswith(_TEXT_TYPES):
            raise NodeScrapeError(node_name, f"GET {host}{path} answered {content_type or 'no content type'}, not text")
        check_metrics_text(node_name, body)
        return body

    def kubelet_config(self, node_name: str) -> dict[str, Any] | None:
        """The node's kubelet configuration (`/configz` → `kubeletconfig`: cpuManagerPolicy, cgroupDriver,
        cpuCFSQuota, cpuCFSQuotaPeriod, …), or None when `read_kubelet_config` is off.

        Opt-in because it needs `get` on `nodes/proxy`, which is close to node admin: the same permission lets a
        client reach every kubelet endpoint, including exec into pods. Raises NodeScrapeError for a failed read.
        """
        if not self.read_kubelet_config:
            return None
        client, host, path = self._kubelet_route(node_name, "configz")
        status, _, body = self._get(node_name, client, host, path, "application/json", MAX_SCRAPE_BYTES)
        if status != 200:
            hint = " (the credentials need get on nodes/proxy)" if status in (401, 403) else ""
            raise NodeScrapeError(
                node_name, f"GET {host}{path} answered HTTP {status}{hint}: {error_text(body)}", status
            )
        try:
            config = json.loads(body).get("kubeletconfig")
        except (ValueError, AttributeError):
            config = None
        if not isinstance(config, dict):
            raise NodeScrapeError(node_name, f"GET {host}{path} answered something other than a kubeletconfig")
        return config

    def kubelet_url(self, node_name: str) -> str:
        """Where `kubelet_direct` reaches this node's kubelet, e.g. `https://10.0.0.5:10250`.

        Uses the address seen by the last `list_nodes()`, else reads the node. Raises NodeScrapeError when the node
        reports no address.
        """
        endpoint = self._kubelet_endpoints.get(node_name)
        if endpoint is None:
            node = self._read_node(node_name)
            endpoint = inventory.kubelet_endpoint(node)
            if endpoint is None:
                raise NodeScrapeError(node_name, "the node reports no address (status.addresses is empty)")
            self._kubelet_endpoints[node_name] = endpoint
        address, port = endpoint
        return kubelet_base_url(address, self._kubelet_port or port, self._kubelet_scheme)

    # -- internals

    def _list(
        self,
        resource: str,
        call: Callable[..., Any],
        convert: Callable[[list[Mapping[str, Any]]], tuple[list[_Item], list[str]]],
        **params: Any,
    ) -> tuple[list[_Item], list[str]]:
        """Every item of a list, converted page by page (problems cut to MAX_PROBLEM_CHARS), so that only one page's
        dicts are held at a time: a cluster's whole list of pods as dicts would cost gigabytes."""
        restarted = False
        while True:
            items: list[_Item] = []
            problems: list[str] = []
            token: str | None = None
            try:
                while True:
                    deadline = time.monotonic() + self.request_timeout_s
                    response = call(
                        limit=self.page_size,
                        _continue=token,
                        _preload_content=False,
                        _request_timeout=self.request_timeout_s,
                        **params,
                    )
                    page = json_object(_read_body(response, deadline, MAX_LIST_PAGE_BYTES), f"a {resource} page")
                    converted, page_problems = convert(inventory.list_items(page))
                    items.extend(converted)
                    problems.extend(problem[:MAX_PROBLEM_CHARS] for problem in page_problems)
                    metadata = page.get("metadata")
                    token = metadata.get("continue") if isinstance(metadata, Mapping) else None
                    del page
                    if not token:
                        return items, problems
            except ApiException as error:
                if error.status == 410 and token is not None and not restarted:
                    logger.warning(
                        "listing %s from %s: the continue token expired (HTTP 410) after %d items; "
                        "restarting the list once",
                        resource,
                        self.server,
                        len(items),
                    )
                    restarted = True
                    continue
                if error.status == 410 and restarted:
                    raise SourceError(
                        f"listing {resource} from {self.server}: the continue token expired again (HTTP 410) after "
                        f"restarting the list; the list takes longer than the API server keeps tokens (~5 min)"
                    ) from None
                raise SourceError(
                    f"listing {resource} from {self.server}: HTTP {error.status}: {_api_error_text(error)}"
                ) from None
            except (urllib3.exceptions.HTTPError, OSError, _BodyTimeout) as error:
                raise SourceError(f"listing {resource} from {self.server}: {_describe(error, self)}") from None
            except (ValueError, inventory.InventoryError) as error:
                raise SourceError(f"listing {resource} from {self.server}: {error}") from None

    def _read_node(self, node_name: str) -> Mapping[str, Any]:
        deadline = time.monotonic() + self.request_timeout_s
        try:
            response = self._core.read_node(node_name, _preload_content=False, _request_timeout=self.request_timeout_s)
            body = _read_body(response, deadline, MAX_LIST_PAGE_BYTES)
            return json_object(body, f"node {node_name}")
        except ApiException as error:
            message = f"reading the node from {self.server}: HTTP {error.status}: {_api_error_text(error)}"
            raise NodeScrapeError(node_name, message, error.status) from None
        except (urllib3.exceptions.HTTPError, OSError, _BodyTimeout, ValueError) as error:
            raise NodeScrapeError(node_name, f"reading the node from {self.server}: {_describe(error, self)}") from None

    def _kubelet_route(self, node_name: str, endpoint: str) -> tuple[k8s_client.ApiClient, str, str]:
        """(client, host, path) for a kubelet endpoint: direct to the kubelet, or through the API server proxy."""
        if not node_name:
            raise NodeScrapeError("?", "no node name given")
        if self._kubelet_client is not None:
            return self._kubelet_client, self.kubelet_url(node_name), f"/{endpoint}"
        return self._api_client, self.server, f"/api/v1/nodes/{quote(node_name, safe='')}/proxy/{endpoint}"

    def _get(
        self,
        node_name: str,
        client: k8s_client.ApiClient,
        host: str,
        path: str,
        accept: str,
        max_bytes: int,
        long_lines: _LongLines | None = None,
    ) -> tuple[int, str, bytes]:
        """GET with the client's credentials and TLS settings; (status, content type, body) whatever the status."""
        deadline = time.monotonic() + self.request_timeout_s
        method, url, headers, _, _ = client.param_serialize(
            method="GET",
            resource_path=path,
            header_params={"Accept": accept, "Accept-Encoding": "gzip"},
            auth_settings=["BearerToken"],
            _host=host,
        )
        try:
            response = client.call_api(method, url, header_params=headers, _request_timeout=self.request_timeout_s)
            raw = response.response
            body = _read_body(raw, deadline, max_bytes, long_lines)
        except (urllib3.exceptions.HTTPError, OSError, _BodyTimeout) as error:
            raise NodeScrapeError(node_name, f"GET {url}: {_describe(error, self)}") from None
        except ApiException as error:  # the client turns TLS failures into ApiException(status=0)
            raise NodeScrapeError(node_name, f"GET {url}: {error.reason}") from None
        except _TooLarge as error:
            raise NodeScrapeError(node_name, f"GET {url}: {error}") from None
        return response.status, str(raw.headers.get("Content-Type", "")), body


# ------------------------------------------------------------------------------------------------------ helpers


class _BodyTimeout(Exception):
    """The answer started but did not finish within the request timeout (a dribbling server)."""


class _TooLarge(ValueError):
    pass


class _LongLines:
    """Cuts the lines of a streamed body to `max_line_bytes` as its chunks arrive (a line may span chunks).

    Most chunks hold no long line, and a few `find` calls show it without copying: a line longer than 2w bytes
    covers a whole window of w bytes, on a grid of w, that holds no newline. Raises _TooLarge past
    MAX_SCRAPE_RECEIVED_BYTES received, so a body of endless lines is not read for ever.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._window = max(1, max_line_bytes // 2)
        self._line_bytes = 0  # bytes of the unfinished line received so far
        self._received = 0

    def feed(self, chunk: bytes) -> bytes:
        self._received += len(chunk)
        if self._received > MAX_SCRAPE_RECEIVED_BYTES:
            raise _TooLarge(f"the answer goes on past {MAX_SCRAPE_RECEIVED_BYTES} bytes")
        limit = self.max_line_bytes
        first = chunk.find(b"\n")
        if first < 0:
            if self._line_bytes + len(chunk) <= limit:
                self._line_bytes += len(chunk)
                return chunk
        else:
            last = chunk.rfind(b"\n")
            tail = len(chunk) - last - 1
            if self._line_bytes + first <= limit and tail <= limit and self._no_long_line(chunk, first, last):
                self._line_bytes = tail
                return chunk
        return self._cut(chunk)

    def _no_long_line(self, chunk: bytes, first: int, last: int) -> bool:
        window = self._window
        return all(chunk.find(b"\n", start, start + window) >= 0 for start in range(first, last - window, window))

    def _cut(self, chunk: bytes) -> bytes:
        kept: list[bytes] = []
        start, size = 0, len(chunk)
        while start < size:
            end = chunk.find(b"\n", start)
            stop = size if end < 0 else end
            room = self.max_line_bytes - self._line_bytes
            if room > 0:
                kept.append(chunk[start : start + min(room, stop - start)])
            self._line_bytes += stop - start
            if end < 0:
                break
            kept.append(b"\n")
            self._line_bytes = 0
            start = end + 1
        return b"".join(kept)


def _connect(kubeconfig: str | None, context: str | None, in_cluster: bool) -> k8s_client.ApiClient:
    configuration = k8s_client.Configuration()
    configuration.retries = _RETRIES
    try:
        if in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return k8s_client.ApiClient(configuration)
        # persist_config=False: a refreshed token is never written back into the operator's kubeconfig file.
        return k8s_config.new_client_from_config(
            config_file=kubeconfig, context=context, persist_config=False, client_configuration=configuration
        )
    except (ConfigException, OSError, ValueError, TypeError) as error:
        where = "the in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        context_text = f" context {context!r}" if context else ""
        raise SourceError(f"cannot load {where}{context_text}: {error}") from None


def _kubelet_client(configuration: k8s_client.Configuration, insecure: bool) -> k8s_client.ApiClient:
    """A client for the kubelets: the API server's credentials and CA, its own TLS server name checks."""
    kubelet = copy.copy(configuration)  # shallow: api_key stays shared, so token refreshes reach both clients
    kubelet.verify_ssl = not insecure
    kubelet.tls_server_name = None  # the kubeconfig's tls-server-name names the API server, not the kubelets
    kubelet.assert_hostname = None
    return k8s_client.ApiClient(kubelet)


def _read_body(response: Any, deadline: float, max_bytes: int, long_lines: _LongLines | None = None) -> bytes:
    """Read a streamed urllib3 response to the end, giving up at `deadline` (time.monotonic()) or past max_bytes
    kept; `long_lines` cuts long lines on the way."""
    # BytesIO hands its buffer over on getvalue(): joining a list of chunks held the body twice at the end.
    body = io.BytesIO()
    received = 0
    finished = False
    try:
        while True:
            if time.monotonic() > deadline:
                raise _BodyTimeout(f"the answer did not finish in time ({received} bytes received)")
            chunk = response.read1(_CHUNK_BYTES)
            if not chunk:
                break
            received += len(chunk)
            if long_lines is not None:
                chunk = long_lines.feed(chunk)
            if body.tell() + len(chunk) > max_bytes:
                raise _TooLarge(
                    f"the answer is larger than {max_bytes} bytes ({max_bytes / 2**20:g} MiB), the most accepted"
                )
            body.write(chunk)
        finished = True
    finally:
        if not finished:
            response.close()  # unread bytes must not go back to the pool with the connection
        response.release_conn()
    return body.getvalue()


def _describe(error: BaseException, source: KubernetesSource) -> str:
    reason: BaseException = error
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        reason = error.reason
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: a refused connection must be told first.
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return f"cannot connect: {reason}"
    if isinstance(reason, urllib3.exceptions.TimeoutError | TimeoutError | _BodyTimeout):
        detail = f": {reason}" if isinstance(reason, _BodyTimeout) else ""
        return f"no complete answer within {source.request_timeout_s:g} s{detail}"
    return f"{type(reason).__name__}: {reason}"


def _api_error_text(error: ApiException) -> str:
    body = error.body
    if isinstance(body, str) and body:
        return error_text(body.encode())
    return str(error.reason or "no details")
