"""Turns the scheduler config file into (plugin spec, args) pairs for the profile."""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from pyextender.framework.registry import PluginSpec
from pyextender.plugins.registry import REGISTRY

log = logging.getLogger(__name__)

DEFAULT_CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: predicates
  - name: binpack
    arguments:
      binpack.weight: 1
  - name: nodeorder
    arguments:
      leastrequested.weight: 1
"""


class ConfigError(ValueError):
    """The scheduler config is invalid; the message names the key."""


def _args(spec: PluginSpec, raw: dict[str, Any]) -> Any:
    known = {f.name: f for f in fields(spec.args_type)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.removeprefix(f"{spec.name}.").replace(".", "_")
        if name not in known:
            raise ConfigError(f"plugin {spec.name}: unknown argument {key!r}")
        kwargs[name] = value
    try:
        return spec.args_type(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"plugin {spec.name}: {exc}") from exc


def load_plugins(path: str | None) -> list[tuple[PluginSpec, Any]]:
    text = DEFAULT_CONFIG if path is None else Path(path).read_text()
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    out: list[tuple[PluginSpec, Any]] = []
    for tier in doc.get("tiers") or []:
        for entry in tier.get("plugins") or []:
            name = entry.get("name")
            spec = REGISTRY.get(name)
            if spec is None:
                log.warning("plugin %r is not available yet; skipped", name)
                continue
            out.append((spec, _args(spec, entry.get("arguments") or {})))
    return out
