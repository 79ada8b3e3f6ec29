"""Whether a string can name a Kubernetes object at all.

A name the API server could never hold needs no lookup: no such object exists.
Asking anyway sends the API server a path it refuses (400 for ``%``), which a
caller would report as an outage instead of the caller's mistake.
"""

from __future__ import annotations

import re

from pyextender.api.volcano.network_topology import DNS_LABEL, DNS_SUBDOMAIN

_SUBDOMAIN = re.compile(DNS_SUBDOMAIN)
_LABEL = re.compile(DNS_LABEL)
MAX_NAME = 253
"""Characters in an object name (a DNS subdomain): pods, nodes, queues, ..."""
MAX_NAMESPACE = 63
"""Characters in a namespace name (a DNS label)."""
NAME_RULE = "a DNS subdomain: at most 253 lower-case letters, digits, '-' and '.'"
NAMESPACE_RULE = "a DNS label: at most 63 lower-case letters, digits and '-'"


def is_object_name(name: str) -> bool:
    """Whether ``name`` can name a pod, node, queue or another object named by DNS subdomain."""
    return len(name) <= MAX_NAME and _SUBDOMAIN.fullmatch(name) is not None


def is_namespace_name(name: str) -> bool:
    """Whether ``name`` can name a namespace."""
    return len(name) <= MAX_NAMESPACE and _LABEL.fullmatch(name) is not None
