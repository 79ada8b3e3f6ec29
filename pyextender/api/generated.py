"""Files generated from code (CRDs, webhook configurations): write, or check."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path


def stale_files(out: Path, render: Callable[[], Mapping[str, str]]) -> list[Path]:
    """Files under ``out`` that are missing or differ from what ``render`` produces."""
    return [
        out / name
        for name, text in render().items()
        if not (out / name).exists() or (out / name).read_text() != text
    ]


def generate_main(
    prog: str, default_out: Path, render: Callable[[], Mapping[str, str]], argv: list[str] | None
) -> int:
    """``prog [--out DIR] [--check]``: write the files, or exit 1 naming stale ones."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--out", type=Path, default=default_out, help="output directory")
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.out, render)
        for path in stale:
            print(f"stale: {path} (run {prog})", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (args.out / name).write_text(text)
        print(args.out / name)
    return 0
