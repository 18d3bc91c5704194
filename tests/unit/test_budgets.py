"""Budgets: defaults, validation with one-line errors, pyproject table, CLI overrides."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from faultload.checker.budgets import MIB, Budgets, load_budgets, parse_override, read_pyproject_budgets

REPO = Path(__file__).resolve().parents[2]


def one_line_error(excinfo: pytest.ExceptionInfo[ValueError]) -> str:
    text = str(excinfo.value)
    assert "\n" not in text
    return text


def write_pyproject(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body)
    return path


def test_defaults_are_valid_and_documented() -> None:
    budgets = Budgets()
    assert budgets.fds_per_in_flight == 3.0 and budgets.fds_slack == 64
    assert budgets.rss_slack_bytes == 256 * MIB and budgets.drain_rss_epsilon_bytes == 64 * MIB
    assert budgets.healthz_max_failures == 0 and budgets.attempts_per_request_max == 50
    assert budgets.clean_log_allow == ()
    from faultload.checker.budget_docs import BUDGET_DOCS
    from faultload.checker.compose import CHECKERS
    from faultload.checker.training import TRAINING_CHECKERS

    assert list(BUDGET_DOCS) == list(Budgets.names()), "every budget, and only a budget, has its BUDGET_DOCS entry"
    invariants = {name for name, _ in CHECKERS + TRAINING_CHECKERS} | {"session_growth"}  # the suite's session view
    for name, doc in BUDGET_DOCS.items():
        assert doc.unit and doc.why and set(doc.invariants) <= invariants, name


def test_to_dict_is_json_and_round_trips() -> None:
    budgets = Budgets(clean_log_allow=("CancelledError",))
    data = json.loads(json.dumps(budgets.to_dict()))
    assert Budgets.from_mapping(data) == budgets


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Budgets().fds_slack = 1  # type: ignore[misc]


def test_no_file_no_overrides_gives_defaults() -> None:
    assert load_budgets(None, {}) == Budgets()
    assert load_budgets(None, []) == Budgets()


def test_the_projects_own_pyproject_loads() -> None:
    assert isinstance(load_budgets(REPO / "pyproject.toml", {}), Budgets)


def test_file_then_overrides(tmp_path: Path) -> None:
    path = write_pyproject(
        tmp_path,
        """
[project]
name = "x"

[tool.faultload.budgets]
fds_slack = 100
rss_slack_bytes = "512MiB"
healthz_p99_s = 0.5
clean_log_allow = ["CancelledError", "shutdown"]
""",
    )
    budgets = load_budgets(path, {})
    assert budgets.fds_slack == 100
    assert budgets.rss_slack_bytes == 512 * MIB
    assert budgets.healthz_p99_s == 0.5
    assert budgets.clean_log_allow == ("CancelledError", "shutdown")
    assert budgets.fds_per_in_flight == Budgets().fds_per_in_flight  # untouched keys keep defaults

    overridden = load_budgets(path, {"fds_slack": "7", "drain_rss_epsilon_bytes": "1GiB"})
    assert overridden.fds_slack == 7
    assert overridden.drain_rss_epsilon_bytes == 1024 * MIB
    assert overridden.rss_slack_bytes == 512 * MIB  # from the file

    as_list = load_budgets(path, ["fds_slack=7", "healthz_p99_s = 2"])
    assert as_list.fds_slack == 7 and as_list.healthz_p99_s == 2.0


def test_missing_table_gives_defaults(tmp_path: Path) -> None:
    path = write_pyproject(tmp_path, '[tool.other]\nx = 1\n[tool.faultload]\ndefault_target = "skyrl==0.4.0"\n')
    assert load_budgets(path, {}) == Budgets()
    assert read_pyproject_budgets(path) == {}


def test_unknown_key_in_file_names_it_and_lists_known(tmp_path: Path) -> None:
    path = write_pyproject(tmp_path, "[tool.faultload.budgets]\nfd_slack = 3\n")
    with pytest.raises(ValueError) as excinfo:
        load_budgets(path, {})
    text = one_line_error(excinfo)
    assert "'fd_slack'" in text and "known:" in text and "fds_slack" in text and str(path) in text


def test_unknown_override_names_it_and_lists_known() -> None:
    with pytest.raises(ValueError) as excinfo:
        load_budgets(None, ["rss_slack=1"])
    text = one_line_error(excinfo)
    assert "'rss_slack'" in text and "rss_slack_bytes" in text


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("fds_slack=lots", "fds_slack"),
        ("fds_slack=-1", "fds_slack"),
        ("fds_per_in_flight=nan", "fds_per_in_flight"),
        ("rss_slack_bytes=12 parsecs", "rss_slack_bytes"),
        ("rss_slack_bytes=0.5", "rss_slack_bytes"),
        ("healthz_failure_fraction=2", "healthz_failure_fraction"),
        ("healthz_p99_s=0", "healthz_p99_s"),
        ("drain_rss_growth_fraction=1.5", "drain_rss_growth_fraction"),
        ("attempts_per_request=1", "attempts_per_request"),
        ("attempts_per_request_max=2.5", "attempts_per_request_max"),
        ("clean_log_allow=[unclosed", "clean_log_allow"),
        ("clean_log_allow=(unclosed", "clean_log_allow"),
    ],
)
def test_bad_values_raise_one_line_naming_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        load_budgets(None, [override])
    assert fragment in one_line_error(excinfo)


def test_max_attempts_below_mean_is_rejected() -> None:
    with pytest.raises(ValueError) as excinfo:
        Budgets(attempts_per_request=10.0, attempts_per_request_max=5)
    assert "attempts_per_request_max" in one_line_error(excinfo)


def test_toml_types_are_checked(tmp_path: Path) -> None:
    path = write_pyproject(tmp_path, "[tool.faultload.budgets]\nfds_slack = true\n")
    with pytest.raises(ValueError) as excinfo:
        load_budgets(path, {})
    assert "fds_slack" in one_line_error(excinfo)
    path = write_pyproject(tmp_path, "[tool.faultload.budgets]\nclean_log_allow = [1, 2]\n")
    with pytest.raises(ValueError):
        load_budgets(path, {})
    # an integral float is fine for an int budget; an int for a float budget too
    path = write_pyproject(tmp_path, "[tool.faultload.budgets]\nfds_slack = 10.0\nhealthz_p99_s = 2\n")
    budgets = load_budgets(path, {})
    assert budgets.fds_slack == 10 and isinstance(budgets.fds_slack, int)
    assert budgets.healthz_p99_s == 2.0 and isinstance(budgets.healthz_p99_s, float)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as excinfo:
        load_budgets(tmp_path / "missing.toml", {})
    assert "not found" in one_line_error(excinfo)
    with pytest.raises(ValueError) as excinfo:
        load_budgets(write_pyproject(tmp_path, "[tool.faultload.budgets\n"), {})
    assert "not valid TOML" in one_line_error(excinfo)
    with pytest.raises(ValueError) as excinfo:
        load_budgets(write_pyproject(tmp_path, "[tool.faultload]\nbudgets = 3\n"), {})
    assert "not a table" in one_line_error(excinfo)


def test_clean_log_allow_from_the_command_line() -> None:
    assert load_budgets(None, ["clean_log_allow=CancelledError"]).clean_log_allow == ("CancelledError",)
    assert load_budgets(None, ['clean_log_allow=["a,b", "c"]']).clean_log_allow == ("a,b", "c")
    assert load_budgets(None, ["clean_log_allow="]).clean_log_allow == ()


def test_parse_override() -> None:
    assert parse_override("fds_slack=3") == ("fds_slack", "3")
    assert parse_override(" clean_log_allow = a=b ") == ("clean_log_allow", "a=b")
    for bad in ("fds_slack", "=3", ""):
        with pytest.raises(ValueError) as excinfo:
            parse_override(bad)
        assert "NAME=VALUE" in one_line_error(excinfo)
