"""The ``pyextender`` command: one sub-command per role.

Each sub-command module exposes ``register(subparsers)``, which adds its parser
and sets ``func`` to a callable taking the parsed args and returning an exit
code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from controllers import cli as controllers_cli
    from controllers import release_cli
    from pyextender.server import serve_cli, validate_cli
    from pyextender.simulate import cli as simulate_cli
    from webhook import cli as webhook_cli

    parser = argparse.ArgumentParser(
        prog="pyextender",
        description="Volcano-style batch scheduling as a kube-scheduler extender.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve_cli.register(sub)
    simulate_cli.register(sub)
    controllers_cli.register(sub)
    webhook_cli.register(sub)
    release_cli.register(sub)
    validate_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
