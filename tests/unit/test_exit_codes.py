"""Exit codes tell the server's fault (1) from the rig's (3): one source (``cli.exits``), every command.

The mapping is checked here on values. A real trial whose load worker is killed mid-load (SIGKILL, as the kernel's
OOM killer would) must exit 3 with the report naming the harness error, not 1:
``tests/integration/test_exit_codes_integration.py``.
"""

from __future__ import annotations

import pytest

from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS, EXIT_OK, compare_exit, matrix_exit, trial_exit


@pytest.mark.parametrize(
    ("violated", "harness", "incomplete", "code"),
    [
        (False, False, False, EXIT_OK),
        (True, False, False, EXIT_FAILED),
        (True, True, True, EXIT_HARNESS),
        (False, True, True, EXIT_HARNESS),
        (False, False, True, EXIT_FAILED),
    ],
)
def test_a_violation_is_the_servers_and_a_harness_error_the_rigs_whatever_it_saw(violated, harness, incomplete, code):
    assert trial_exit(violated, harness, incomplete) == code


def _row(as_expected: bool, result: str) -> dict:
    return {"as_expected": as_expected, "result": result}


def test_a_matrix_row_not_as_expected_is_a_finding_and_a_row_not_judged_the_rigs() -> None:
    assert matrix_exit([_row(True, "clean"), _row(True, "caught")]) == EXIT_OK
    assert matrix_exit([_row(False, "error"), _row(True, "clean")]) == EXIT_HARNESS
    assert matrix_exit([_row(False, "error"), _row(False, "clean")]) == EXIT_FAILED


def test_a_comparison_with_a_trial_that_failed_to_run_is_the_rigs_unless_a_metric_is_worse() -> None:
    failed_trial = [{"error": "a load worker crashed"}]
    assert compare_exit({"ok": True, "worse": [], "unknown": [], "trials": [{}]}) == EXIT_OK
    assert compare_exit({"ok": False, "worse": [], "unknown": ["e2e_p99_s"], "trials": failed_trial}) == EXIT_HARNESS
    assert compare_exit({"ok": False, "worse": ["e2e_p99_s"], "unknown": [], "trials": failed_trial}) == EXIT_FAILED
    assert compare_exit({"ok": False, "worse": [], "unknown": ["e2e_p99_s"], "trials": [{}]}) == EXIT_FAILED


def test_every_commands_help_lists_the_exit_codes() -> None:
    import argparse

    from faultload.cli.exits import EXIT_CODES, epilog
    from faultload.cli.parser import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, parser in sub.choices.items():
        assert parser.format_help().rstrip().endswith(epilog().rstrip()), name
    assert all(f"  {code:<4}" in epilog() for code in EXIT_CODES)
