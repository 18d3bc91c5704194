"""The commands that run many trials: ``faultload matrix`` (a suite session per row) and ``faultload compare``
(one trial on two builds, ABBA), and what they write."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from faultload.cli.cluster import join_rows_cluster
from faultload.cli.exits import EXIT_INTERRUPTED, EXIT_USAGE, compare_exit, matrix_exit
from faultload.cli.from_args import build_trial, config_path, guarded, workspace_of
from faultload.cli.parser import UsageError
from faultload.compare import report as compare_report
from faultload.compare.html import write_compare_html
from faultload.compare.judge import comparison_json, load_compare_settings
from faultload.compare.runner import abba, judge_trials, run_comparison
from faultload.host.lanes import COMPARISON_WAIT_S, admission_for
from faultload.matrix import run as matrix_mod
from faultload.matrix.jobs import run_rows_at_once
from faultload.matrix.spread import spread_rows
from faultload.model.build import parse_build
from faultload.model.target import parse_target
from faultload.setup.provision import provision
from faultload.store import matrix_table
from faultload.store import report as report_mod
from faultload.store.html_matrix import write_matrix_html
from faultload.store.junit import matrix_suite, write_junit
from faultload.store.plot import PlotUnavailable


def cmd_matrix(args: argparse.Namespace) -> int:
    """0 when every row came out as expected, 1 otherwise."""

    try:
        rows = matrix_mod.select_rows([n.strip() for n in args.rows.split(",") if n.strip()] if args.rows else None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    left_out = [row for row in rows if not row.runs_on(args.profile)] if args.rows else []
    if left_out:
        why = left_out[0].expectation(args.profile).why
        raise UsageError(f"--rows: {left_out[0].name} is not run on the {args.profile} profile: {why}")
    logs = Path(args.logs).resolve() if args.logs else None

    def log(message: str) -> None:
        print(f"faultload matrix: {message}", file=sys.stderr, flush=True)

    if args.jobs > 1 and args.ray:
        raise UsageError("--jobs: rows at once on this machine, or --ray: over a cluster's nodes, not both")
    cluster = join_rows_cluster(args)
    spread = (lambda rows_, run_one: spread_rows(cluster, rows_, run_one, log)) if cluster is not None else None
    if args.jobs > 1:
        spread = functools.partial(run_rows_at_once, jobs=args.jobs, log=log)
    try:
        result = matrix_mod.run_matrix(
            rows,
            args.profile,
            all_properties=args.all_properties,
            workdir=logs,
            log=log,
            session_s=args.session_s,
            home=args.home,
            spread=spread,
        )
    except KeyboardInterrupt:
        print("faultload: interrupted; every row's session stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if cluster is not None:
            cluster.close()
    table = matrix_table.markdown_table(result)
    print(table)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown_out:
        Path(args.markdown_out).write_text(table)
    if args.junit_xml:
        write_junit([matrix_suite(result)], args.junit_xml)
    if args.html:
        write_matrix_html(result, args.html)
    return matrix_exit(result["rows"])


def cmd_compare(args: argparse.Namespace) -> int:
    """0 when no metric of the candidate is worse than the baseline's, 1 when one is (or is unknown)."""
    try:
        builds = {
            "baseline": parse_build(args.baseline, "--baseline"),
            "candidate": parse_build(args.candidate, "--candidate"),
        }
        abba(args.repeats)
        settings = load_compare_settings(config_path(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    args.target, args.regress, args.fix = builds["baseline"].target, [], []
    config, budgets = build_trial(args)
    workspace = workspace_of(args)
    short = provision(
        workspace,
        [parse_target(b.target) for b in builds.values()],
        args.go,
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    if short is not None:
        print(f"faultload: {short}", file=sys.stderr)
        return EXIT_USAGE
    log = (
        (lambda message: None)
        if args.quiet
        else (lambda m: print(f"faultload compare: {m}", file=sys.stderr, flush=True))
    )
    trials, stopped = guarded(
        lambda: run_comparison(
            config,
            builds,
            args.repeats,
            workspace,
            budgets,
            log,
            admission=admission_for(workspace.root, COMPARISON_WAIT_S, 1),
        ),
        "interrupted; every trial's stack stopped",
    )
    if stopped is not None:
        return stopped
    result = judge_trials(builds, trials, settings)
    write_comparison(args, result, trials)
    return compare_exit(result)


def write_comparison(args: argparse.Namespace, result: dict, trials) -> None:
    table = compare_report.markdown_table(result)
    if args.trials_out:
        folder = Path(args.trials_out)
        folder.mkdir(exist_ok=True)
        for trial in trials:
            report_mod.write_json(trial.report, folder / f"{trial.order:02d}-{trial.side}.json")
    if args.plot:
        try:
            result["plot_path"] = str(compare_report.write_plot(result, trials, args.plot))
        except PlotUnavailable as exc:
            result["plot_skipped"] = str(exc)
            print(f"faultload: plot skipped: {exc}", file=sys.stderr)
    if args.json_out:
        Path(args.json_out).write_text(comparison_json(result))
    if args.markdown_out:
        Path(args.markdown_out).write_text(table)
    if args.junit_xml:
        write_junit([compare_report.junit_suite(result)], args.junit_xml)
    if args.html:
        write_compare_html(result, trials, args.html)
    print(table)
