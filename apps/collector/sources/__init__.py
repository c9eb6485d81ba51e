"""Where cluster data comes from. Each source lives in its own module and imports its client library itself, so
importing this package costs nothing and a missing optional client only breaks the source that needs it.

The errors every source raises live here, so callers can catch them without importing any client:
`SourceError` for a failure that stops the whole call (listing pods, loading credentials), `NodeScrapeError` for one
node that could not be read (the collector records it and goes on with the other nodes).
"""

from __future__ import annotations

__all__ = ["NodeScrapeError", "SourceError"]


class SourceError(Exception):
    """A source could not do what was asked; the message names the server, the request and the HTTP status."""


class NodeScrapeError(SourceError):
    """One node's kubelet could not be read; the other nodes are unaffected."""

    def __init__(self, node: str, message: str, status: int | None = None) -> None:
        super().__init__(f"node {node}: {message}")
        self.node = node
        self.status = status  # the HTTP status when there was an answer, else None (timeout, refused, garbage)
