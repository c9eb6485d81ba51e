"""Kubernetes' name rules, checked wherever a name enters (inventory, readings, tokens, the agent's payload).

The API server refuses names outside these rules, so a name that breaks them did not come from a real cluster: it
is refused at the door rather than stored, where it would break URLs, headers and downloads further on.
Namespaces and container names are DNS labels (RFC 1123, at most 63 characters); pods and nodes DNS subdomains
(dot-separated labels, at most 253): k8s.io/apimachinery/pkg/util/validation IsDNS1123Label / IsDNS1123Subdomain.
"""

from __future__ import annotations

import re
from functools import lru_cache

_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
LABEL = re.compile(_LABEL)
SUBDOMAIN = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*")
SUBDOMAIN_TEXT = "lowercase letters, digits, '-' and '.', at most 253 characters"
LABEL_TEXT = "lowercase letters, digits and '-', at most 63 characters"

# What each kind of name must be: (pattern, the rule in words).
RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "namespace": (LABEL, LABEL_TEXT),
    "container": (LABEL, LABEL_TEXT),
    "pod": (SUBDOMAIN, SUBDOMAIN_TEXT),
    "node": (SUBDOMAIN, SUBDOMAIN_TEXT),
}


@lru_cache(maxsize=100_000)  # the same names arrive every cycle; a batch of 150,000 readings checks each once
def name_problem(kind: str, name: str) -> str | None:
    """Why `name` is not a valid Kubernetes name of `kind` ("namespace", "container", "pod", "node"), or None."""
    pattern, rule = RULES[kind]
    if pattern.fullmatch(name):
        return None
    return f"is not a Kubernetes {kind} name ({rule})"
