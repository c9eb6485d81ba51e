"""Prometheus' HTTP API, over the standard library's urllib (no client library needed): one instant query
(`/api/v1/query`) at a time, its answer checked and handed back as an instant vector.

Anything speaking that API works: Prometheus, Thanos Query, Mimir, VictoriaMetrics.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import datetime
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit
from urllib.request import Request, urlopen

from apps.collector.sources.base import SourceError
from apps.collector.sources.prometheus.convert import VectorSample

__all__ = ["MAX_BODY_BYTES", "PrometheusClient", "PrometheusError"]

MAX_BODY_BYTES = 512 * 1024 * 1024  # far above kube_pod_info of the largest clusters: this only stops a runaway answer
_CHUNK_BYTES = 256 * 1024


class PrometheusError(SourceError):
    """Prometheus could not be asked or refused the query; the message names the server, the query and the status."""


class PrometheusClient:
    """Instant queries against one Prometheus (or anything speaking its HTTP API: Thanos Query, Mimir, VictoriaMetrics).

    `url` is the server's base URL, path prefix included (`https://prom.example/prometheus`); user and password in
    it become HTTP basic auth and are never shown in messages. `timeout_s` bounds each query, body included, and is
    passed to Prometheus as its own query timeout.
    """

    def __init__(self, url: str, *, timeout_s: float) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"Prometheus URL {url!r} is not an http:// or https:// URL with a host")
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port is not None:
            netloc = f"{netloc}:{parts.port}"
        self.base_url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.timeout_s = timeout_s
        self._headers = {
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": "cputune",
        }
        if parts.username is not None:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(credentials).decode("ascii")

    def query(self, promql: str, at: datetime) -> list[VectorSample]:
        """Evaluate `promql` at the instant `at` (timezone-aware); the result must be an instant vector.

        Raises PrometheusError when the server cannot be reached, answers no complete body within `timeout_s`,
        answers an HTTP error or `"status": "error"`, or sends something that is not the Prometheus API.
        """
        if at.tzinfo is None:
            raise ValueError(f"query instant must be timezone-aware, got naive {at.isoformat()}")
        form = {"query": promql, "time": f"{at.timestamp():.3f}", "timeout": f"{self.timeout_s:g}s"}
        request = Request(  # noqa: S310 - the scheme is checked in __init__
            self.base_url + "/api/v1/query", data=urlencode(form).encode(), headers=self._headers, method="POST"
        )
        shown = _shorten(promql)
        deadline = time.monotonic() + self.timeout_s
        try:
            with urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - the scheme is checked in __init__
                body = _read_body(response, deadline)
                status = response.status
        except HTTPError as exc:
            detail = _api_error(exc.read(64 * 1024)) or exc.reason
            raise PrometheusError(
                f"Prometheus at {self.base_url} answered HTTP {exc.code} to {shown}: {detail}"
            ) from None
        except TimeoutError:
            raise PrometheusError(
                f"Prometheus at {self.base_url} gave no complete answer within {self.timeout_s:g} s to {shown}"
            ) from None
        except URLError as exc:
            raise PrometheusError(f"cannot reach Prometheus at {self.base_url}: {exc.reason}") from None
        except OSError as exc:
            raise PrometheusError(f"cannot reach Prometheus at {self.base_url}: {exc}") from None
        return _vector(body, status, self.base_url, shown)


def _read_body(response: Any, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError
        chunk = response.read(_CHUNK_BYTES)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PrometheusError(f"the answer passed {MAX_BODY_BYTES // (1024 * 1024)} MB; refusing to read more")
        chunks.append(chunk)


def _api_error(body: bytes) -> str:
    """`errorType: error` from a Prometheus error body, else the start of the body as text."""
    try:
        document = json.loads(body)
    except ValueError:
        return _snippet(body)
    if isinstance(document, dict) and document.get("error"):
        return f"{document.get('errorType') or 'error'}: {document['error']}"
    return _snippet(body)


def _vector(body: bytes, status: int, url: str, shown: str) -> list[VectorSample]:
    try:
        document = json.loads(body)
    except ValueError:
        raise PrometheusError(
            f"{url} answered HTTP {status} to {shown} with a body that is not JSON ({_snippet(body)!r}): "
            "is this the base URL of a Prometheus server?"
        ) from None
    if not isinstance(document, dict) or document.get("status") != "success":
        detail = _api_error(body) if isinstance(document, dict) else _snippet(body)
        raise PrometheusError(f"Prometheus at {url} refused {shown}: {detail}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusError(f"Prometheus at {url} answered {shown} with a {kind}, expected an instant vector")
    samples: list[VectorSample] = []
    for item in data["result"]:
        try:
            labels = item["metric"]
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            raise PrometheusError(
                f"Prometheus at {url} answered {shown} with a malformed sample {item!r:.200}"
            ) from None
        samples.append(VectorSample(labels, value))
    return samples


def _snippet(body: bytes) -> str:
    text = body[:120].decode("utf-8", "replace").strip()
    return text + ("…" if len(body) > 120 else "")


def _shorten(promql: str) -> str:
    flat = " ".join(promql.split())
    return f"query {flat[:160]!r}" + ("…" if len(flat) > 160 else "")
