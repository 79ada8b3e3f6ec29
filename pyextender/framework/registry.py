"""How plugins are described to the framework: a name, typed args, a factory.

The one registry of all plugins lives in ``pyextender.plugins.registry``
(plugins sit above the framework in the import order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyextender.framework.interfaces import Plugin


@dataclass(frozen=True, slots=True)
class PluginAlias:
    """A name under which a config may list a plugin, e.g. a GPU vendor's Volcano
    plugin that does what ours does. The entry loads as the plugin itself."""

    name: str
    arguments: Mapping[str, str] = field(default_factory=dict)
    """The alias's argument key -> ours; keys not listed are read as our own keys."""
    note: str = ""
    """How the alias's meaning maps onto ours (for the README and validate-config)."""


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """A plugin kind: ``args_type`` is a frozen dataclass whose fields (with
    defaults and docstrings) are the plugin's arguments; ``factory`` builds
    the plugin from a validated instance of it."""

    name: str
    args_type: type[Any]
    factory: Callable[[Any], Plugin]
    summary: str
    aliases: tuple[PluginAlias, ...] = ()
    """Other names this plugin loads under (another distribution's name for it)."""
