"""devcluster's binary build: explicit names, and no half-built cache entry ever.

The first round's build let Go name binaries after the package path, so
``go.etcd.io/etcd/server/v3`` came out as ``server`` and a fresh machine could
not build the cluster. These tests pin the naming of every component and the
atomic write, using a stand-in ``go`` on PATH for the failure paths.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from devcluster import build


def _all_binaries() -> list[tuple[build.Component, build.Binary]]:
    return [(c, b) for c in build.COMPONENTS for b in c.binaries]


@pytest.mark.parametrize(
    ("component", "binary"), _all_binaries(), ids=[b.name for _, b in _all_binaries()]
)
def test_every_binary_is_built_to_an_explicit_file(
    component: build.Component, binary: build.Binary, tmp_path: Path
) -> None:
    out = tmp_path / f".{binary.name}.partial"
    cmd = build.build_command("go", binary, out)
    # exactly one package, and -o names the file itself (not a folder with a trailing /)
    assert cmd[:2] == ["go", "build"]
    assert cmd[cmd.index("-o") + 1] == str(out)
    assert cmd[-1] == binary.package
    assert sum(1 for a in cmd if "/" in a and not a.startswith("-")) == 2  # out + package
    assert component.workdir.is_dir(), f"module folder {component.workdir} missing"


def test_expected_components_and_names() -> None:
    names = {b.name: b.package for _, b in _all_binaries()}
    for needed in ("etcd", "kube-apiserver", "kube-scheduler", "kubectl", "kwok"):
        assert needed in names
    # the package path ends in a major version: Go alone would call the file "v3"/"server"
    assert names["etcd"] == "go.etcd.io/etcd/server/v3"
    assert build.binary_path("etcd").name == "etcd"
    assert len(names) == len(_all_binaries()), "two binaries share a name"


def test_cache_layout_is_keyed_by_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYEXTENDER_BIN_CACHE", str(tmp_path))
    assert build.binary_path("kube-apiserver") == (
        tmp_path / f"kube-{build.KUBE_VERSION}" / "kube-apiserver"
    )
    assert build.binary_path("etcd").parent.name.startswith("etcd-v3.")


def test_unknown_binary_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: etcd"):
        build.binary_path("etcdd")
    with pytest.raises(KeyError):
        build.ensure_binaries(only=["kube-apiservr"])


def test_kube_binaries_carry_their_version() -> None:
    flags = {b.name: b.ldflags for _, b in _all_binaries()}
    for name in ("kube-apiserver", "kube-scheduler", "kubectl"):
        assert f"k8s.io/component-base/version.gitVersion={build.KUBE_VERSION}" in flags[name]


def test_source_hash_changes_with_the_sources(tmp_path: Path) -> None:
    (tmp_path / "main.go").write_text("package main\n")
    first = build.source_hash(tmp_path)
    (tmp_path / "README.md").write_text("not a source")
    assert build.source_hash(tmp_path) == first
    (tmp_path / "main_test.go").write_text("package main\n")
    (tmp_path / "benchclient").mkdir()
    (tmp_path / "benchclient" / "main.go").write_text("package main\n")
    assert build.source_hash(tmp_path, skip=("benchclient",)) == first
    (tmp_path / "main.go").write_text("package main // edited\n")
    assert build.source_hash(tmp_path, skip=("benchclient",)) != first


def _fake_go(bin_dir: Path, binary_script: str) -> None:
    """A ``go`` whose ``build -o FILE`` writes ``binary_script`` to FILE."""
    go = bin_dir / "go"
    go.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "-o" ]; do shift; done\n'
        f"cat > \"$2\" <<'EOF'\n{binary_script}\nEOF\n"
        'chmod +x "$2"\n'
    )
    go.chmod(go.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PYEXTENDER_BIN_CACHE", str(cache))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def test_a_binary_that_does_not_run_never_enters_the_cache(fake_env: Path) -> None:
    _fake_go(fake_env, "#!/bin/sh\necho 'exec format error' >&2\nexit 126")
    comp, binary = build._find("etcd")
    with pytest.raises(SystemExit, match="does not run"):
        build.build_one(comp, binary, quiet=True)
    folder = build.binary_path("etcd").parent
    assert not build.binary_path("etcd").exists()
    assert list(folder.iterdir()) == [], "a partial file was left behind"


def test_a_good_build_is_checked_then_renamed(fake_env: Path) -> None:
    _fake_go(fake_env, "#!/bin/sh\necho 'etcd Version: 3.6.8'")
    comp, binary = build._find("etcd")
    path = build.build_one(comp, binary, quiet=True)
    assert path == build.binary_path("etcd") and path.is_file()
    assert [p.name for p in path.parent.iterdir()] == ["etcd"]
    # cached now: ensure_binaries does not call go again (a go that fails proves it)
    (fake_env / "go").write_text("#!/bin/sh\nexit 3\n")
    assert build.ensure_binaries(only=["etcd"]) == {"etcd": path}


def test_a_failed_go_build_leaves_nothing(fake_env: Path) -> None:
    (fake_env / "go").write_text("#!/bin/sh\necho 'cannot find module' >&2\nexit 1\n")
    (fake_env / "go").chmod(0o755)
    comp, binary = build._find("kwok")
    with pytest.raises(SystemExit, match="building kwok failed"):
        build.build_one(comp, binary, quiet=True)
    assert not build.binary_path("kwok").exists()
    assert list(build.binary_path("kwok").parent.iterdir()) == []


def test_volcanos_scheduler_is_built_only_when_named(fake_env: Path) -> None:
    """vc-scheduler serves one bench (bench/e2e.py --mode volcano): building every
    binary (make binaries, CI) must not pay for it, naming it must build it."""
    # every default binary "cached": a go that would build anything fails the test
    for comp in build.COMPONENTS:
        for b in comp.binaries:
            if not comp.on_demand:
                build.binary_path(b.name).parent.mkdir(parents=True, exist_ok=True)
                build.binary_path(b.name).write_text("")
    (fake_env / "go").write_text("#!/bin/sh\nexit 3\n")
    (fake_env / "go").chmod(0o755)
    everything = build.ensure_binaries(quiet=True)
    assert "vc-scheduler" not in everything
    assert {"etcd", "kube-apiserver", "kube-scheduler", "kwok", "helm"} <= set(everything)
    _fake_go(fake_env, "#!/bin/sh\necho 'API Version: v1alpha1'")
    built = build.ensure_binaries(quiet=True, only=["vc-scheduler"])
    assert built == {"vc-scheduler": build.binary_path("vc-scheduler")}
    assert built["vc-scheduler"].parent.name == f"volcano-{build.VOLCANO_VERSION}"
    assert built["vc-scheduler"].is_file()
