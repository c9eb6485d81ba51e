"""The advice policy as the settings give it (thresholds that are settings; the rest are Policy's defaults)."""

from __future__ import annotations

from django.conf import settings

from .facts import Policy


def policy_from_settings() -> Policy:
    return Policy(throttle_target=settings.CPUTUNE_THROTTLE_TARGET)
