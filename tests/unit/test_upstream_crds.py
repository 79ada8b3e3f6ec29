"""Volcano's release CRDs come from the Go module proxy; failures say what went wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster import upstream_crds


def test_no_go_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(upstream_crds.FetchError, match="`go` not found"):
        upstream_crds.module_dir()


def test_a_refused_version_names_the_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "go"
    fake.write_text(
        '#!/bin/sh\necho \'{"Path": "volcano.sh/volcano", "Error": "403 Forbidden"}\'\nexit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(upstream_crds.FetchError, match=r"volcano\.sh/volcano@v9\.9\.9: 403"):
        upstream_crds.module_dir("v9.9.9")


def test_missing_files_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(upstream_crds, "module_dir", lambda version: tmp_path)
    with pytest.raises(upstream_crds.FetchError, match=r"batch\.volcano\.sh_jobs\.yaml"):
        upstream_crds.crd_files(tmp_path)
