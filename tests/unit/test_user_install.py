"""A user's install: `faultload setup` building Toxiproxy, and what the wheel ships.

Nothing here downloads. Go is either absent for real (a PATH without a ``go``
and ``GO`` naming no file, as in tests/unit/test_doctor.py) or a test double: a
shell script standing in for ``go install`` that writes the ``server`` binary
the real one would, fails half-way, or hangs, so the builder's bookkeeping
(temp folder, atomic move, timeout, clean-up) is checked without a compiler.
The wheel is built offline (``--no-build-isolation``) from a copy of the
source, with the setuptools of the running interpreter.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, cli_env, python_exe

from faultload.faults.toxiproxy import process_gone
from faultload.faults.toxiproxy_build import ToxiproxyBuildError, ensure_toxiproxy

# A stand-in toxiproxy-server: prints its version the way the real one does.
FAKE_SERVER = "#!/bin/sh\necho 'toxiproxy-server version 2.12.0'\n"


def _fake_go(tmp_path: Path, body: str) -> str:
    """An executable ``go`` whose ``install`` runs ``body`` (with $GOBIN set by the builder)."""
    go = tmp_path / "fake-go"
    go.write_text(f"#!/bin/sh\n{body}\n")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return str(go)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_builds_into_tool_dir_and_then_does_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "go-ran"
    go = _fake_go(tmp_path, f'touch {marker}\nprintf %s "{FAKE_SERVER}" > "$GOBIN/server"\nchmod +x "$GOBIN/server"')
    tools = tmp_path / "ws" / "tools"
    built = ensure_toxiproxy(tools, go, log=lambda _: None)
    assert built == tools / "toxiproxy-server" and _tree(tools) == ["toxiproxy-server"]
    marker.unlink()
    assert ensure_toxiproxy(tools, go, log=lambda _: None) == built
    assert not marker.exists()  # the pinned version is there: go is not run again


@pytest.mark.parametrize(
    "body",
    [
        "echo partial > \"$GOBIN/server\"\necho 'go: build failed' >&2\nexit 1",  # fails after writing half a binary
        'echo \'not toxiproxy\' > "$GOBIN/server"\nchmod +x "$GOBIN/server"',  # "succeeds" with a binary that is wrong
    ],
)
def test_a_failed_build_leaves_nothing(tmp_path: Path, body: str) -> None:
    ws = tmp_path / "ws"
    with pytest.raises(ToxiproxyBuildError) as raised:
        ensure_toxiproxy(ws / "tools", _fake_go(tmp_path, body), log=lambda _: None)
    assert "\n" not in str(raised.value)
    assert not ws.exists()  # the folders the build made are gone again


def test_a_hung_build_is_stopped_and_leaves_nothing(tmp_path: Path) -> None:
    pid_file = tmp_path / "go.pid"
    tools = tmp_path / "tools"
    tools.mkdir()  # an existing folder stays, empty
    go = _fake_go(tmp_path, f"sleep 300 &\necho $! > {pid_file}\nwait")
    with pytest.raises(ToxiproxyBuildError, match="took over 1s"):
        ensure_toxiproxy(tools, go, log=lambda _: None, timeout_s=1.0)
    assert _tree(tools) == []
    assert process_gone(int(pid_file.read_text())), "the build's child outlived the timeout"


def _env_without_go(tmp_path: Path) -> dict[str, str]:
    dirs = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "go").exists() and not (Path(d) / "toxiproxy-server").exists()
    ]
    return {"PATH": os.pathsep.join(dirs), "GO": str(tmp_path / "no-go")}


def test_setup_without_go_says_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    workdir = tmp_path / "fl"
    env = {**cli_env(uuid.uuid4().hex), **_env_without_go(tmp_path)}
    result = subprocess.run(
        [python_exe(), "-m", "faultload", "setup", "--workdir", str(workdir), "--target", "url=http://127.0.0.1:1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no `go` to build it" in lines[0] and "faultload setup" in lines[0], lines
    assert not workdir.exists()


def test_wheel_ships_what_runs_inside_the_target_and_the_suite(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", minversion="68")  # pyproject's build requirement; offline build uses ours
    source = tmp_path / "src"
    shutil.copytree(ROOT / "faultload", source / "faultload", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    (wheel,) = (tmp_path / "dist").glob("faultload-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {str(p.relative_to(source)) for p in (source / "faultload").rglob("*.py")}
    # the compiled router's and client's source: an installed faultload's setup builds them
    for program in ("router", "client"):
        shipped |= {
            str(p.relative_to(source)) for p in (source / "faultload" / program / "go").rglob("*") if p.is_file()
        }
    assert shipped <= names, sorted(shipped - names)
    for needed in (
        "faultload/targets/skyrl_patches.py",
        "faultload/targets/skyrl_launch.py",
        "faultload/suite/test_properties.py",
        "faultload/faults/toxiproxy_build.py",
    ):
        assert needed in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "faultload = faultload.cli.main:main" in text and "faultload = faultload.suite.plugin" in text
