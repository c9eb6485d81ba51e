"""Push rate per ingest token and node: an agent pushes every 15 s by default (and retries a few times), so a
node far above that is a loop or a forger. A token's total is then bounded by its cluster's node count."""

from __future__ import annotations

import hashlib

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from .models import ApiToken


class NodePushThrottle(SimpleRateThrottle):
    """Checked by the ingest view once the body names its node (DRF's own throttles run before parsing)."""

    scope = "ingest"

    def __init__(self, node: str) -> None:
        self.node = node
        super().__init__()

    def get_rate(self) -> str:
        return settings.CPUTUNE_INGEST_RATE  # read per request, so a test or an operator can change it

    def get_cache_key(self, request: Request, view: object) -> str | None:
        if not isinstance(request.auth, ApiToken):
            return None
        # The prefix, not the pk: with a shared cache (Redis) a recycled pk must not inherit another token's count.
        node = hashlib.sha256(self.node.encode()).hexdigest()[:16]
        return f"throttle_ingest_{request.auth.prefix}_{node}"
