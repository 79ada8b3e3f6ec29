"""``pyextender validate-config FILE``: check a scheduler config before rolling it out.

The same loader the sidecar uses (and reloads with), so a file that passes here
loads there. Every problem is printed, one per line, naming the key; exit 1
when there is any, 0 with a short summary of what would run when there is none.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from pyextender.framework.config import ConfigError, SchedulerConfig


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "validate-config",
        help="check a scheduler config file (Volcano actions + tiers) and name every problem",
        description=(
            "Load a scheduler config as `pyextender serve --config` would. Prints every "
            "problem (unknown plugin, action, option or argument; wrong type) and exits 1, "
            "or prints what would run and exits 0. Vendor plugin names such as gpu-aware "
            "and gpu-podaffinity load as the plugins they stand for. Names of Volcano's "
            "scheduler that pyextender does not run (e.g. the plugin network-topology-aware, "
            "the argument predicate.DynamicResourceAllocationEnable, the action shuffle) are "
            "listed as warnings, one per line; a name close to a known one is a problem."
        ),
    )
    p.add_argument("file", help="the scheduler config YAML")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any name is ignored (warnings count as problems)",
    )
    p.set_defaults(func=run)


def summary(config: SchedulerConfig) -> list[str]:
    """Lines saying what a valid config runs: its actions, then each tier's plugins."""
    lines = [f"actions: {', '.join(config.actions)}"]
    for i, tier in enumerate(config.tiers, 1):
        names = [
            f"{p.name} (written {p.written_as})" if p.written_as else p.name for p in tier.plugins
        ]
        lines.append(f"tier {i}: {', '.join(names) if names else '(empty)'}")
    return lines


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from pyextender.plugins.defaults import load

    out = out or sys.stdout
    err = err or sys.stderr
    try:
        config = load(args.file)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=err)
        count = len(exc.problems)
        print(f"{args.file}: {count} problem{'s' if count != 1 else ''}", file=err)
        return 1
    print(f"{args.file}: ok", file=out)
    for line in summary(config):
        print(f"  {line}", file=out)
    for warning in config.warnings:
        label = "note" if warning.mapped_to else "warning"
        print(f"  {label}: {warning.message}", file=out)
    ignored = len(config.ignored)
    if ignored:
        print(f"{args.file}: {ignored} name{'s' if ignored != 1 else ''} ignored", file=out)
    return 1 if args.strict and ignored else 0
