"""Typed arguments of the actions, from the config's ``configurations`` list::

    configurations:
    - name: enqueue
      arguments: {requireFit: true}

The loader (pyextender.framework.config) turns each action's arguments into the
frozen dataclass named here and refuses an unknown key, naming it; actions
without an entry keep their arguments as a plain mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyextender.framework.plugin_args import arg, arguments


@arguments
class EnqueueArgs:
    """Arguments of the enqueue action."""

    require_fit: bool = arg(
        "Admit (Pending -> Inqueue) only a gang whose minMember pods all exist and fit the "
        "free capacity now, lifting its gates at once (pyextender's stricter mode). Default "
        "false: Volcano's enqueue, on minResources against the queue and the cluster x "
        "overcommit; the gates still come off only when the whole gang fits.",
        default=False,
        aliases=("requireFit", "enqueue.requireFit"),
    )
    overcommit_factor: float | None = arg(
        "Accepted for Volcano's older configs, which set it here; the overcommit plugin's "
        "own overcommit-factor argument is the one that applies.",
        default=None,
        aliases=("overcommit-factor",),
    )


ACTION_ARGS: Mapping[str, type[Any]] = {"enqueue": EnqueueArgs}
"""Action name -> its arguments' type, for ``load_config(action_args=...)``."""


def require_fit(configurations: Mapping[str, Any]) -> bool:
    """enqueue.requireFit from a loaded config's configurations (typed or plain)."""
    conf = configurations.get("enqueue")
    if isinstance(conf, EnqueueArgs):
        return conf.require_fit
    if isinstance(conf, Mapping):
        value = conf.get("requireFit", conf.get("enqueue.requireFit", conf.get("require_fit")))
        return value is True or str(value).lower() == "true"
    return False
