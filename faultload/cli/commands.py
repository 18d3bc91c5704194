"""What each ``faultload`` command does: run | confirm | check | replay | matrix | setup | doctor.

:mod:`faultload.cli.main` parses the command line and imports this module only
once a command has been parsed: every spawned load worker re-imports the
CLI's module, and what the commands need (the trial machinery, the matrix,
the doctor) is theirs alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faultload.setup import doctor as doctor_mod
from faultload.matrix import run as matrix_mod
from faultload.checker.budgets import apply_overrides, load_budgets
from faultload.checker.judge import judge
from faultload.compare import report as compare_report
from faultload.compare.html import write_compare_html
from faultload.compare.judge import comparison_json, load_compare_settings
from faultload.compare.runner import abba, judge_trials, run_comparison
from faultload.cli.cluster import join_for, join_rows_cluster
from faultload.matrix.spread import spread_rows
from faultload.cli.parser import UsageError
from faultload.host.settings import find_config
from faultload.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, REPLAY_EXITS
from faultload.model.build import parse_build
from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig, procs_for
from faultload.model.shape import ClientPolicy, LoadShape, parse_poll_behaviour
from faultload.model.target import DEFAULT_TARGET, parse_target
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.run.preflight import DoesNotFit, current_limits, plan
from faultload.run.progress import ProgressLine
from faultload.setup.provision import provision
from faultload.store import report as report_mod
from faultload.store import matrix_table
from faultload.store.bundle import write_bundle
from faultload.model.training import TrainingMix, parse_training
from faultload.store.check import check_bundle
from faultload.store.junit import matrix_suite, trial_suite, write_junit
from faultload.store.plot import PlotUnavailable, write_timeline
from faultload.store.html_matrix import write_matrix_html
from faultload.store.html_trial import write_trial_html
from faultload.store.repro import replay, replay_command, write_repro
from faultload.suite.shrink import load_failure, shrink, shrunk_repro
from faultload.targets.install import InstallError
from faultload.targets.server import ServerStartError
from faultload.run.trial import run_trial
from faultload.run.watchdog import load_watchdog_limits
from faultload.host.workspace import Workspace, output_folder_problem


def _workspace(args: argparse.Namespace) -> Workspace:
    """--workdir, else $FAULTLOAD_HOME (read by :func:`main` into ``args.home``), else ./.faultload."""
    return Workspace.default(args.workdir or args.home)


def config_from_args(args: argparse.Namespace):
    """Build and validate a TrialConfig from parsed args (ValueError on bad input)."""

    shape = LoadShape(
        requests=args.requests, result_tokens=args.result_tokens, num_samples=args.num_samples,
        max_outstanding=args.max_outstanding, workers=args.workers, client=args.client, accept=args.accept,
        time_scale=args.time_scale, seed=args.seed, policy=ClientPolicy(),
        delay_polls=parse_poll_behaviour(args.delay_polls, "--delay-polls") if args.delay_polls else LoadShape().delay_polls,
        abandon_polls=parse_poll_behaviour(args.abandon_polls, "--abandon-polls") if args.abandon_polls else LoadShape().abandon_polls,
        training=_training_from_args(args),
    )
    barrier = args.barrier
    if args.router_mode == "barrier" and barrier == 0:
        cap = args.max_outstanding or args.requests
        barrier = min(args.requests, cap)
    held = barrier if args.router_mode == "barrier" else (args.max_outstanding or args.requests)
    procs = args.router_procs or procs_for(min(held, args.requests))
    router = RouterConfig(
        mode=args.router_mode, barrier=barrier, barrier_timeout_s=args.barrier_timeout,
        max_num_seqs=args.max_num_seqs, gen_seconds=args.gen_seconds, procs=procs,
    )
    knobs = ServerKnobs(args.forwarding_max_connections, args.forwarding_timeout, args.retrieved_ttl)
    faults = FaultSchedule.parse(args.fault)
    config = TrialConfig(
        target=args.target, shape=shape, router=router, regress=tuple(args.regress), fixes=tuple(args.fix), knobs=knobs,
        faults=faults, proxies=args.proxies,
        allow_remote=args.allow_remote, server_pid=args.server_pid, server_port=args.server_port,
        max_wall_s=args.max_wall, profile_server=args.profile_server, early_stop=not args.no_early_stop,
        fatal_faults=tuple(args.fatal_fault), watchdog=load_watchdog_limits(_config_path(args)),
        engine=args.engine or ("null" if shape.training.enabled else "sleeper"),
        engine_s_per_token=args.engine_seconds_per_token,
    )
    config.validate()
    return config


def _training_from_args(args: argparse.Namespace) -> TrainingMix:
    """--trainers and --training-spread as a TrainingMix (none without --trainers)."""
    if args.trainers is None:
        if args.training_spread:
            raise ValueError("--training-spread needs --trainers")
        return TrainingMix()
    mix = dataclasses.replace(parse_training(args.trainers), spread_s=args.training_spread)
    for holds, message in mix.problems():
        if not holds:
            raise ValueError(message)
    return mix


def _config_path(args: argparse.Namespace) -> Path | None:
    """The pyproject.toml holding [tool.faultload.*] settings (:func:`faultload.host.settings.find_config`
    from the current directory: --config, or the nearest with a [tool.faultload] table)."""
    return find_config(Path.cwd(), args.config or None)


def _output_dirs_exist(args: argparse.Namespace, options: tuple[str, ...]) -> None:
    """UsageError naming the first output option whose folder does not exist: said before the work, not after a
    trial of minutes (a confirm run with --json-out in a missing folder ran 70 s, then ended in a traceback);
    or one this process may not write in."""
    for option in options:
        path = getattr(args, option, None)
        problem = output_folder_problem(path) if path else None
        if problem:
            raise UsageError(f"--{option.replace('_', '-')}: {problem}")


# every output a trial writes (run, confirm): each folder is checked before the work starts
_TRIAL_OUTPUTS = ("json_out", "plot", "history", "bundle", "junit_xml", "html")


def _build(args: argparse.Namespace):
    """(config, budgets) from args; UsageError on bad input."""
    _output_dirs_exist(args, _TRIAL_OUTPUTS)
    try:
        return config_from_args(args), load_budgets(_config_path(args), args.budget)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run_and_report(args: argparse.Namespace, config, budgets, cluster=None) -> int:
    """Run one trial (its workers on ``cluster``'s nodes when given), judge it, print and write what
    was asked; the exit code."""

    progress = None if args.quiet else ProgressLine(config.shape.requests, sys.stderr)
    pools = {"pools": cluster.pool} if cluster is not None else {}
    try:
        result = run_trial(config, _workspace(args), progress=progress, **pools)
    except (ServerStartError, InstallError, RuntimeError, OSError) as exc:
        print(f"faultload: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # a trial interrupted once its load ran returns its partial result instead
        print("faultload: interrupted before the load started; everything stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if progress is not None:
            progress.close()
    verdicts = judge(result, budgets)
    report = report_mod.build_report(result, verdicts)
    # The JSON first, before anything optional (history, plot) can fail or be
    # interrupted; written again if those add to it.
    if args.json_out:  # before printing too: a closed stdout (`| head`) must not lose the report
        report_mod.write_json(report, args.json_out)
    if args.junit_xml:
        write_junit([trial_suite(report, args.command)], args.junit_xml)
    if _write_extras(args, result, report, budgets, verdicts) and args.json_out:
        report_mod.write_json(report, args.json_out)
    print(report_mod.render_text(report))
    if result.interrupted:
        return EXIT_INTERRUPTED
    if result.error or any(v.ok is False for v in verdicts) or report["completed"] < report["requested"]:
        return EXIT_FAILED
    return EXIT_OK


def _write_extras(args: argparse.Namespace, result, report: dict, budgets, verdicts) -> bool:
    """The history, bundle, HTML report and plot asked for, their paths into ``report``; True if it changed.

    Without matplotlib the plot is skipped with one line saying why (and
    ``plot_skipped`` in the report); the run's exit code does not change.
    """
    changed = False
    if args.history:
        result.history.save(args.history)
        report["history_path"] = str(args.history)
        changed = True
    if args.bundle:

        report["bundle_path"] = str(write_bundle(result, budgets, verdicts, args.bundle))
        changed = True
    if args.html:
        report["html_path"] = str(write_trial_html(result, verdicts, args.html))
        changed = True
    if args.plot:

        try:
            report["plot_path"] = str(write_timeline(result, args.plot))
        except PlotUnavailable as exc:
            report["plot_skipped"] = str(exc)
            print(f"faultload: plot skipped: {exc}", file=sys.stderr)
        changed = True
    return changed


def cmd_run(args: argparse.Namespace) -> int:
    _build(args)  # bad values are told before a cluster is joined
    cluster = join_for(args)
    try:
        config, budgets = _build(args)
        return _run_and_report(args, config, budgets, cluster)
    finally:
        if cluster is not None:
            cluster.close()


def cmd_confirm(args: argparse.Namespace) -> int:
    """The full-size run: fit it to the machine (or --ray's nodes) first, say what changed, then run and
    judge it."""

    _output_dirs_exist(args, _TRIAL_OUTPUTS)  # before joining a cluster or the preflight
    cluster = join_for(args)
    try:
        return _confirm(args, cluster)
    finally:
        if cluster is not None:
            cluster.close()


def _confirm(args: argparse.Namespace, cluster) -> int:
    try:
        limits = current_limits() if cluster is None else cluster.limits(current_limits())
        fit = plan(args.requests, args.max_outstanding, args.workers, limits)
        if not args.max_outstanding:
            # As many SDK sampling clients as workers, each at its default
            # sample_max_concurrent_requests, within what the machine holds.
            sdk_like = LoadShape().max_outstanding * fit.workers
            fit = plan(args.requests, min(sdk_like, fit.max_outstanding), fit.workers, limits)
    except DoesNotFit as exc:
        raise UsageError(f"confirm run does not fit this machine: {exc}") from None
    for note in fit.notes:
        print(f"faultload: preflight: {note}", file=sys.stderr)
    print(
        f"faultload: preflight: {args.requests} requests, outstanding {fit.max_outstanding}, "
        f"{fit.workers} workers, {fit.router_procs} router processes",
        file=sys.stderr,
    )
    args.max_outstanding, args.workers = fit.max_outstanding, fit.workers
    args.router_procs = args.router_procs or fit.router_procs
    if args.json_out:
        stem = Path(args.json_out).with_suffix("")
        args.plot = args.plot or f"{stem}.png"
        args.history = args.history or f"{stem}-history.npz"
    config, budgets = _build(args)
    return _run_and_report(args, config, budgets, cluster)


def cmd_replay(args: argparse.Namespace) -> int:
    """Run a repro file again: 1 if its failure reproduces, 0 if not (reported as flaky)."""

    status, stopped = _guarded(lambda: replay(args.file, _workspace(args), args.json_out, target=args.target,
                                              fixes=tuple(args.fix)), "interrupted; everything stopped")
    return REPLAY_EXITS[status] if stopped is None else stopped


def _guarded(work: Callable[[], Any], interrupted: str) -> tuple[Any, int | None]:
    """(what ``work`` returned, None), or (None, the exit code) when it could not run: a bad value is a
    UsageError; a server that did not start, an install that failed, an OS error: one line, exit 2; Ctrl-C:
    ``interrupted``, exit 130 (what it started is stopped by then)."""
    try:
        return work(), None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except (ServerStartError, InstallError, RuntimeError, OSError) as exc:
        print(f"faultload: {exc}", file=sys.stderr)
        return None, EXIT_USAGE
    except KeyboardInterrupt:
        print(f"faultload: {interrupted}", file=sys.stderr)
        return None, EXIT_INTERRUPTED


def cmd_shrink(args: argparse.Namespace) -> int:
    """Reduce a failed trial (a bundle, a JSON report or a repro) and write the repro of the smallest one that
    still fails: 1 (the failure stands, its repro written), 0 when the source violated nothing."""

    if args.out and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: no such folder")
    try:
        failure = load_failure(args.source)
        stored = failure.budgets if failure.budgets is not None else load_budgets(_config_path(args))
        budgets = apply_overrides(stored, args.budget)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not failure.failing:
        print(f"faultload shrink: {args.source}: no invariant was violated; nothing to shrink")
        return EXIT_OK
    log = (lambda message: None) if args.quiet else (
        lambda message: print(f"faultload shrink: {message}", file=sys.stderr, flush=True))
    workspace = _workspace(args)
    log(f"{failure.config.shape.requests} requests, {len(failure.config.faults.faults)} faults; failed "
        f"{', '.join(failure.failing)}; at most {args.max_trials} trials, {args.time_limit:g} s")
    started = time.monotonic()
    shrunk, stopped = _guarded(lambda: shrink(failure, budgets, lambda config: run_trial(config, workspace),
                                              max_trials=args.max_trials, time_limit_s=args.time_limit, log=log),
                               "interrupted; everything stopped, no repro written")
    if stopped is not None:
        return stopped
    stem, repro = shrunk_repro(failure, shrunk, budgets, args.source, time.monotonic() - started)
    path = write_repro(repro, Path(args.out) if args.out else workspace.root / "repros", stem)
    print(f"shrunk {failure.config.shape.requests} -> {shrunk.config.shape.requests} requests, "
          f"{len(failure.config.faults.faults)} -> {len(shrunk.config.faults.faults)} faults in {shrunk.trials} "
          f"trials ({time.monotonic() - started:.0f} s" + (f"; {shrunk.stopped}" if shrunk.stopped else "") + ")")
    print(f"repro: {path}")
    print(f"replay: {replay_command(path)}")
    return EXIT_FAILED


def cmd_check(args: argparse.Namespace) -> int:
    """Judge a stored trial bundle again: 0 when every verdict held, 1 when one is violated."""

    try:
        return EXIT_FAILED if check_bundle(args.bundle, args.budget, args.json_out) else EXIT_OK
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_matrix(args: argparse.Namespace) -> int:
    """0 when every row came out as expected, 1 otherwise."""

    try:
        rows = matrix_mod.select_rows([n.strip() for n in args.rows.split(",") if n.strip()] if args.rows else None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _output_dirs_exist(args, ("json_out", "markdown_out", "junit_xml", "html"))
    logs = Path(args.logs).resolve() if args.logs else None

    def log(message: str) -> None:
        print(f"faultload matrix: {message}", file=sys.stderr, flush=True)

    cluster = join_rows_cluster(args)
    spread = (lambda rows_, run_one: spread_rows(cluster, rows_, run_one, log)) if cluster is not None else None
    try:
        result = matrix_mod.run_matrix(rows, args.profile, all_properties=args.all_properties, workdir=logs, log=log,
                                       session_s=args.session_s, home=args.home, spread=spread)
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
    return EXIT_OK if result["ok"] else EXIT_FAILED


def cmd_compare(args: argparse.Namespace) -> int:
    """0 when no metric of the candidate is worse than the baseline's, 1 when one is (or is unknown)."""
    try:
        builds = {"baseline": parse_build(args.baseline, "--baseline"),
                  "candidate": parse_build(args.candidate, "--candidate")}
        abba(args.repeats)
        settings = load_compare_settings(_config_path(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _output_dirs_exist(args, ("json_out", "markdown_out", "plot", "trials_out", "junit_xml", "html"))
    args.target, args.regress, args.fix = builds["baseline"].target, [], []
    config, budgets = _build(args)
    workspace = _workspace(args)
    short = provision(workspace, [parse_target(b.target) for b in builds.values()], args.go,
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    if short is not None:
        print(f"faultload: {short}", file=sys.stderr)
        return EXIT_USAGE
    log = (lambda message: None) if args.quiet else (lambda m: print(f"faultload compare: {m}", file=sys.stderr, flush=True))
    trials, stopped = _guarded(lambda: run_comparison(config, builds, args.repeats, workspace, budgets, log),
                               "interrupted; every trial's stack stopped")
    if stopped is not None:
        return stopped
    result = judge_trials(builds, trials, settings)
    _write_comparison(args, result, trials)
    return EXIT_OK if result["ok"] else EXIT_FAILED


def _write_comparison(args: argparse.Namespace, result: dict, trials) -> None:
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


def cmd_setup(args: argparse.Namespace) -> int:
    """Toxiproxy, then each target, installed when missing; exit 2 with one line naming what is short."""
    try:
        specs = [parse_target(text) for text in args.target or [DEFAULT_TARGET]]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    short = provision(_workspace(args), specs, args.go, log=lambda m: print(m, file=sys.stderr, flush=True))
    if short is not None:
        print(f"faultload: {short}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    targets = args.target or [DEFAULT_TARGET]
    try:
        specs = [parse_target(t) for t in targets]
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    checks = doctor_mod.run_checks(_workspace(args), specs, args.go)
    print(doctor_mod.render(checks))
    return EXIT_USAGE if doctor_mod.failed(checks) else EXIT_OK


COMMANDS = {"run": cmd_run, "confirm": cmd_confirm, "check": cmd_check, "setup": cmd_setup, "doctor": cmd_doctor,
            "replay": cmd_replay, "matrix": cmd_matrix, "compare": cmd_compare, "shrink": cmd_shrink}
