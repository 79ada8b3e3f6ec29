"""How every pyextender process starts: logging, the event loop, exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Coroutine
from typing import Any

LOG_LEVELS = ("debug", "info", "warning", "error")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level", default="info", choices=LOG_LEVELS, help="log verbosity (default info)"
    )


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def run_server(prog: str, main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop. A missing Kubernetes configuration is a clear
    message and exit code 2; Ctrl-C a clean exit 0."""
    from pyextender.api.client import ClientConfigError

    try:
        import uvloop

        return uvloop.run(main)
    except ClientConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
