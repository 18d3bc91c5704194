"""The settings file's one rule (faultload.host.settings.find_config), and the environment read only at the edges."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultload.cli import commands as cli_commands
from faultload.cli import from_args
from faultload.cli import main as cli
from faultload.host.settings import find_config
from faultload.host.workspace import Workspace

TABLE = "[tool.faultload.budgets]\nfds_slack = 3\n"


def test_an_explicit_file_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(TABLE)
    other = tmp_path / "other.toml"
    other.write_text("")
    assert find_config(tmp_path, other) == other


def test_an_explicit_file_that_is_missing_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--config .*nope.toml: no such file"):
        find_config(tmp_path, tmp_path / "nope.toml")


def test_the_nearest_pyproject_with_a_faultload_table_from_the_start_upward(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(TABLE)
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")  # not faultload's: passed by
    assert find_config(inner, None) == tmp_path / "pyproject.toml"
    (inner / "pyproject.toml").write_text("[tool.faultload.watchdog]\n")
    assert find_config(inner, None) == inner / "pyproject.toml"


def test_an_unreadable_pyproject_is_returned_for_its_loader_to_report(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.faultload.budgets\n")
    assert find_config(tmp_path, None) == tmp_path / "pyproject.toml"


def test_none_found_means_the_defaults(tmp_path: Path) -> None:
    assert find_config(tmp_path, None) is None  # tmp_path and its parents hold no faultload settings


def test_workspace_default_reads_no_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULTLOAD_HOME", str(tmp_path / "from-env"))
    monkeypatch.chdir(tmp_path)
    assert Workspace.default().root == tmp_path / ".faultload"
    assert Workspace.default(tmp_path / "given").root == tmp_path / "given"


def test_the_cli_reads_faultload_home_in_main_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setitem(cli_commands.COMMANDS, "doctor", lambda args: seen.append(from_args.workspace_of(args)) or 0)
    monkeypatch.delenv("FAULTLOAD_HOME", raising=False)
    assert cli.main(["doctor"], environ={"FAULTLOAD_HOME": str(tmp_path / "home")}) == 0
    assert cli.main(["doctor", "--workdir", str(tmp_path / "w")], environ={"FAULTLOAD_HOME": str(tmp_path)}) == 0
    assert [w.root for w in seen] == [tmp_path / "home", tmp_path / "w"]
