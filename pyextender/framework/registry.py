"""How plugins are described to the framework: a name, typed args, a factory.

The one registry of all plugins lives in ``pyextender.plugins.registry``
(plugins sit above the framework in the import order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyextender.framework.interfaces import Plugin


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """A plugin kind: ``args_type`` is a frozen dataclass whose fields (with
    defaults and docstrings) are the plugin's arguments; ``factory`` builds
    the plugin from a validated instance of it."""

    name: str
    args_type: type[Any]
    factory: Callable[[Any], Plugin]
    summary: str
