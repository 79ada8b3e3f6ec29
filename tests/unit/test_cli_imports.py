"""The ``pyextender`` command builds its parser without importing the sidecar.

Every process of ours starts as ``pyextender <sub-command>``, and the parser of
every sub-command is built first. When ``serve``'s parser pulled in the HTTP server
for one constant, the controllers and the webhook (and ``--help``) imported numba,
the kernels and the scheduling cache: 157 MB RSS and half a second before doing
anything, in processes that use none of it. Checked in a fresh interpreter, so
nothing another test imported counts."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from pyextender.cli import build_parser
build_parser().parse_args(["controllers"])
heavy = ("numba", "pyextender.kernels.jit", "pyextender.server.app", "pyextender.cache.cluster")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def test_building_the_parser_imports_no_kernel_or_server() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_simulate_help_names_every_policy() -> None:
    from pyextender.simulate.cli import POLICY_NAMES
    from pyextender.simulate.policies import POLICIES

    assert tuple(POLICIES) == POLICY_NAMES
