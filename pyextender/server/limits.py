"""Request limits of the sidecar's HTTP server, in a module of their own: the
``pyextender`` command reads them to build its ``--help`` for every sub-command,
and must not import the server (numba, the kernels, the cache) to do so."""

from __future__ import annotations

DEFAULT_MAX_BODY_BYTES = 16 * 2**20
"""Largest request body accepted (bytes); a preempt call with full victim pods is the biggest."""
