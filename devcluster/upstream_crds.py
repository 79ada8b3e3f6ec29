"""Volcano's own CRD files, as a Volcano release ships them, from the Go module proxy.

`devcluster/volcano_crds` holds CRDs generated from ours with Volcano's
differences (so the repo carries no upstream text). This module fetches the
real thing instead: the `volcano.sh/volcano` Go module of one release, whose
`config/crd/volcano/bases/` are the files Volcano's installer applies. `go mod
download` keeps them in Go's module cache (content-addressed and checksummed
against sum.golang.org), so only the first run goes to the network, and nothing
is copied into this repository.

Kinds that release does not have yet (CronJob, HyperNode) come from ours.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

VOLCANO_MODULE = "volcano.sh/volcano"
VOLCANO_VERSION = "v1.10.0"
"""The Volcano release whose CRDs are installed. The Go module proxy reachable
from our CI serves this one (newer tags answer 403 there); its PodGroup CRD has
no status subresource and its Queue CRD requires status.allocated, the two
differences our processes must cope with."""

UPSTREAM = (
    "batch.volcano.sh_jobs.yaml",
    "bus.volcano.sh_commands.yaml",
    "scheduling.volcano.sh_podgroups.yaml",
    "scheduling.volcano.sh_queues.yaml",
)
"""Files taken from the release (its numatopologies CRD is not ours to serve)."""
FROM_OURS = ("batch.volcano.sh_cronjobs.yaml", "topology.volcano.sh_hypernodes.yaml")
"""Kinds the release lacks, installed from manifests/crds."""


class FetchError(RuntimeError):
    """The Volcano module could not be downloaded (no Go, or the proxy refused)."""


def module_dir(version: str = VOLCANO_VERSION) -> Path:
    """The unpacked module in Go's module cache, downloading it the first time."""
    with tempfile.TemporaryDirectory(prefix="volcano-crds-") as empty:
        # outside any go.mod, so the download cannot touch a module of ours
        env = dict(os.environ, GOFLAGS="-mod=mod", GO111MODULE="on")
        try:
            proc = subprocess.run(
                ["go", "mod", "download", "-json", f"{VOLCANO_MODULE}@{version}"],
                cwd=empty,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
        except FileNotFoundError as exc:
            raise FetchError(
                "Volcano's CRDs come from the Go module proxy: `go` not found"
            ) from exc
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or info.get("Error") or not info.get("Dir"):
        why = info.get("Error") or proc.stderr.strip() or f"exit code {proc.returncode}"
        raise FetchError(f"go mod download {VOLCANO_MODULE}@{version}: {why}")
    return Path(info["Dir"])


def crd_files(ours: Path, version: str = VOLCANO_VERSION) -> list[Path]:
    """Volcano's CRD files of ``version``, plus ours for the kinds it lacks."""
    bases = module_dir(version) / "config" / "crd" / "volcano" / "bases"
    files = [bases / name for name in UPSTREAM]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FetchError(f"{VOLCANO_MODULE}@{version} has no {', '.join(missing)}")
    return files + [ours / name for name in FROM_OURS]
