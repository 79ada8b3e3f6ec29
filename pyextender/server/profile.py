"""Builds the runtime Profile from plugin specs and validated arguments."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pyextender.framework.interfaces import FilterPlugin, ScorePlugin
from pyextender.framework.registry import PluginSpec
from pyextender.framework.runtime import Observer, Profile

log = logging.getLogger(__name__)


def build_profile(plugins: Sequence[tuple[PluginSpec, Any]], observe: Observer) -> Profile:
    """Filters in tier order; scorers weighted by their ``weight`` argument (default 1)."""
    filters: list[FilterPlugin] = []
    scorers: list[tuple[ScorePlugin, float]] = []
    for spec, args in plugins:
        plugin = spec.factory(args)
        if isinstance(plugin, FilterPlugin):
            filters.append(plugin)
        if isinstance(plugin, ScorePlugin):
            scorers.append((plugin, float(getattr(args, "weight", 1.0))))
    return Profile(filters=filters, scorers=scorers, observe=observe)
