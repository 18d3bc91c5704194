"""Options kept in ``[tool.faultload.<command>]``: the same trial as typed, the command line wins, bad keys
are one line (``faultload.cli.options_file``; no trial runs here, the configs are compared as built)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultload.cli.from_args import config_from_args
from faultload.cli.main import main
from faultload.cli.options_file import parse_with_file
from faultload.cli.parser import build_parser

TYPED = [
    "run",
    "--requests",
    "96",
    "--result-tokens",
    "8",
    "--router-mode",
    "barrier",
    "--barrier",
    "32",
    "--fault",
    "edge:down@1+2",
    "--fault",
    "backend:latency:latency=100@0+5",
    "--time-scale",
    "0.05",
    "--delay-polls",
    "0.5@45",
    "--accept",
    "json",
    "--quiet",
]
FILE = """
[tool.faultload.options.run]
requests = 96
result-tokens = 8
router-mode = "barrier"
barrier = 32
fault = ["edge:down@1+2", "backend:latency:latency=100@0+5"]
time_scale = 0.05
delay-polls = "0.5@45"
accept = "json"
quiet = true
"""


def _args(argv: list[str], cwd: Path):
    return parse_with_file(build_parser(), argv, cwd)


def test_the_file_builds_the_same_trial_as_the_options_typed(tmp_path: Path) -> None:
    config = tmp_path / "faultload.toml"
    config.write_text(FILE)
    from_file = _args(["run", "--config", str(config)], tmp_path)
    typed = _args(TYPED, tmp_path)
    assert config_from_args(from_file) == config_from_args(typed)
    assert from_file.quiet is True and from_file.options_file["path"] == str(config)


def test_the_nearest_pyproject_is_read_and_the_command_line_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(FILE)
    work = tmp_path / "sub"
    work.mkdir()
    args = _args(["run", "--requests", "5", "--fault", "edge:reset_peer@0+1"], work)
    assert args.requests == 5 and args.fault == ["edge:reset_peer@0+1"]  # a typed repeatable option replaces
    assert args.result_tokens == 8 and args.router_mode == "barrier"


def test_other_commands_and_files_without_the_table_change_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.faultload.budgets]\nhealthz_p99_s = 3.0\n")
    args = _args(["run"], tmp_path)
    assert args.options_file is None and args.requests == build_parser().parse_args(["run"]).requests
    assert _args(["doctor"], tmp_path).options_file is None


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("requestz = 7", "[tool.faultload.options.run]: unknown option 'requestz'"),
        ("requests = -7", "[tool.faultload.options.run] requests: expected a whole number >= 0, got '-7'"),
        (
            "router-mode = 'gpu'",
            "[tool.faultload.options.run] router-mode: expected one of barrier, latency, immediate",
        ),
        ("quiet = 'yes'", "[tool.faultload.options.run] quiet: expected true or false"),
        ("requests = [1, 2]", "[tool.faultload.options.run] requests: expected one value"),
        ("config = 'x.toml'", "[tool.faultload.options.run]: unknown option 'config'"),
    ],
)
def test_a_bad_key_or_value_is_one_line_naming_the_file_and_exit_2(body, needle, tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text(f"[tool.faultload.options.run]\n{body}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and err[0].startswith(f"faultload: error: {tmp_path / 'pyproject.toml'}: ") and needle in err[0]
    )


def test_compare_options_live_apart_from_its_thresholds(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.faultload.compare]\nserver_cpu_ms_per_request = 1.2\n\n"
        "[tool.faultload.options.compare]\nrequests = 64\nrepeats = 3\n"
    )
    args = _args(["compare", "--baseline", "skyrl==0.4.0", "--candidate", "skyrl==0.4.0"], tmp_path)
    assert (args.requests, args.repeats) == (64, 3)
    assert args.options_file["keys"] == ["repeats", "requests"]
