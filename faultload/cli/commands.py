"""What each ``faultload`` command does: run | confirm | check | replay | shrink | setup | doctor (matrix and
compare: :mod:`faultload.cli.many_trials`; the values they build from the arguments: :mod:`faultload.cli.from_args`).

:mod:`faultload.cli.main` parses the command line and imports this module only
once a command has been parsed: every spawned load worker re-imports the
CLI's module, and what the commands need (the trial machinery, the matrix,
the doctor) is theirs alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from faultload.checker.budgets import apply_overrides, load_budgets
from faultload.checker.judge import judge
from faultload.cli.cluster import join_for
from faultload.cli.conformance import cmd_conformance
from faultload.cli.exits import (
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    REPLAY_EXITS,
    trial_exit,
)
from faultload.cli.from_args import build_trial, config_path, guarded, install_sdks, workspace_of
from faultload.cli.many_trials import cmd_compare, cmd_matrix
from faultload.cli.parser import UsageError
from faultload.client.session import AccessRefused, SessionUnreadable
from faultload.model.shape import LoadShape
from faultload.model.target import DEFAULT_TARGET, parse_target
from faultload.run.preflight import DoesNotFit, current_limits, plan
from faultload.run.progress import ProgressLine
from faultload.run.trial import run_trial
from faultload.setup import doctor as doctor_mod
from faultload.setup.provision import provision
from faultload.store import report as report_mod
from faultload.store.bundle import write_bundle
from faultload.store.check import check_bundle
from faultload.store.html_trial import write_trial_html
from faultload.store.junit import trial_suite, write_junit
from faultload.store.plot import PlotUnavailable, write_timeline
from faultload.store.repro import replay_command, replay_repeated, write_repro
from faultload.suite.shrink import load_failure, shrink, shrunk_repro
from faultload.targets.install import InstallError
from faultload.targets.server import ServerStartError


def _run_and_report(args: argparse.Namespace, config, budgets, cluster=None) -> int:
    """Run one trial (its workers on ``cluster``'s nodes when given), judge it, print and write what
    was asked; the exit code."""

    progress = None if args.quiet else ProgressLine(config.shape.requests, sys.stderr)
    pools = {"pools": cluster.pool} if cluster is not None else {}
    try:
        result = run_trial(config, workspace_of(args), progress=progress, access=args.access, **pools)
    except (ServerStartError, InstallError, AccessRefused) as exc:
        print(f"faultload: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SessionUnreadable as exc:  # the server's fault, before any load: there is no trial to judge
        print(f"faultload: {exc.verdict_line()}", file=sys.stderr)
        return EXIT_FAILED
    except (RuntimeError, OSError) as exc:  # the rig broke before there was a trial to judge
        print(f"faultload: harness error: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    except KeyboardInterrupt:  # a trial interrupted once its load ran returns its partial result instead
        print("faultload: interrupted before the load started; everything stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if progress is not None:
            progress.close()
    verdicts = judge(result, budgets)
    report = report_mod.build_report(result, verdicts)
    keep = _Keeper(workspace_of(args))
    # The JSON first, before anything optional (history, plot) can fail or be
    # interrupted; written again if those add to it.
    if args.json_out:  # before printing too: a closed stdout (`| head`) must not lose the report
        args.json_out = keep(lambda path: report_mod.write_json(report, path), args.json_out)
    if args.junit_xml:
        keep(lambda path: write_junit([trial_suite(report, args.command)], path), args.junit_xml)
    if _write_extras(args, result, report, budgets, verdicts, keep) and args.json_out:
        report_mod.write_json(report, args.json_out)
    print(report_mod.render_text(report))
    if result.interrupted:
        return EXIT_INTERRUPTED
    return trial_exit(
        any(v.ok is False for v in verdicts), bool(result.error), report["completed"] < report["requested"]
    )


class _Keeper:
    """Writes an output where it was asked, or, when that fails after the trial (the folder was checked before
    it, but a disk fills, a mount goes away), in the workspace's runs folder, saying where: a trial of minutes
    is never lost to its last write."""

    def __init__(self, workspace) -> None:
        self.folder = workspace.runs / f"kept-{time.strftime('%Y%m%dT%H%M%S')}"

    def __call__(self, write, path):
        try:
            write(path)
            return path
        except OSError as exc:
            self.folder.mkdir(parents=True, exist_ok=True)
            kept = self.folder / Path(path).name
            write(kept)
            print(
                f"faultload: could not write {path} ({exc.strerror or exc}); written to {kept} instead", file=sys.stderr
            )
            return str(kept)


def _write_extras(args: argparse.Namespace, result, report: dict, budgets, verdicts, keep: _Keeper) -> bool:
    """The history, bundle, HTML report and plot asked for, their paths into ``report``; True if it changed.

    Without matplotlib the plot is skipped with one line saying why (and
    ``plot_skipped`` in the report); the run's exit code does not change.
    """
    changed = False
    if args.history:
        report["history_path"] = str(keep(result.history.save, args.history))
        changed = True
    if args.bundle:
        report["bundle_path"] = str(keep(lambda path: write_bundle(result, budgets, verdicts, path), args.bundle))
        changed = True
    if args.html:
        report["html_path"] = str(keep(lambda path: write_trial_html(result, verdicts, path), args.html))
        changed = True
    if args.plot:
        try:
            report["plot_path"] = str(keep(lambda path: write_timeline(result, path), args.plot))
        except PlotUnavailable as exc:
            report["plot_skipped"] = str(exc)
            print(f"faultload: plot skipped: {exc}", file=sys.stderr)
        changed = True
    return changed


def cmd_run(args: argparse.Namespace) -> int:
    build_trial(args)  # bad values are told before a cluster is joined
    cluster = join_for(args)
    try:
        config, budgets = build_trial(args)
        return _run_and_report(args, config, budgets, cluster)
    finally:
        if cluster is not None:
            cluster.close()


def cmd_confirm(args: argparse.Namespace) -> int:
    """The full-size run: fit it to the machine (or --ray's nodes) first, say what changed, then run and
    judge it."""

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
    config, budgets = build_trial(args)
    return _run_and_report(args, config, budgets, cluster)


def cmd_replay(args: argparse.Namespace) -> int:
    """Run a repro file again (``--repeats`` times): 1 if its failure reproduces in any run, 0 if in none."""

    status, stopped = guarded(
        lambda: replay_repeated(
            args.file,
            workspace_of(args),
            args.repeats,
            args.json_out,
            target=args.target,
            fixes=tuple(args.fix),
            html=args.html,
        ),
        "interrupted; everything stopped",
    )
    return REPLAY_EXITS[status] if stopped is None else stopped


def cmd_shrink(args: argparse.Namespace) -> int:
    """Reduce a failed trial (a bundle, a JSON report or a repro) and write the repro of the smallest one that
    still fails: 1 (the failure stands, its repro written), 0 when the source violated nothing."""

    try:
        failure = load_failure(args.source)
        stored = failure.budgets if failure.budgets is not None else load_budgets(config_path(args))
        budgets = apply_overrides(stored, args.budget)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not failure.failing:
        print(f"faultload shrink: {args.source}: no invariant was violated; nothing to shrink")
        return EXIT_OK
    log = (
        (lambda message: None)
        if args.quiet
        else (lambda message: print(f"faultload shrink: {message}", file=sys.stderr, flush=True))
    )
    workspace = workspace_of(args)
    log(
        f"{failure.config.shape.requests} requests, {len(failure.config.faults.faults)} faults; failed "
        f"{', '.join(failure.failing)}; at most {args.max_trials} trials, {args.time_limit:g} s"
    )
    started = time.monotonic()
    shrunk, stopped = guarded(
        lambda: shrink(
            failure,
            budgets,
            lambda config: run_trial(config, workspace),
            max_trials=args.max_trials,
            time_limit_s=args.time_limit,
            log=log,
        ),
        "interrupted; everything stopped, no repro written",
    )
    if stopped is not None:
        return stopped
    stem, repro = shrunk_repro(failure, shrunk, budgets, args.source, time.monotonic() - started)
    path = write_repro(repro, Path(args.out) if args.out else workspace.repros, stem)
    print(
        f"shrunk {failure.config.shape.requests} -> {shrunk.config.shape.requests} requests, "
        f"{len(failure.config.faults.faults)} -> {len(shrunk.config.faults.faults)} faults in {shrunk.trials} "
        f"trials ({time.monotonic() - started:.0f} s" + (f"; {shrunk.stopped}" if shrunk.stopped else "") + ")"
    )
    print(f"repro: {path}")
    print(f"replay: {replay_command(path)}")
    return EXIT_FAILED


def cmd_check(args: argparse.Namespace) -> int:
    """Judge a stored trial bundle again: 0 when every verdict held, 1 when one is violated."""

    try:
        return EXIT_FAILED if check_bundle(args.bundle, args.budget, args.json_out) else EXIT_OK
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_setup(args: argparse.Namespace) -> int:
    """Each SDK release, then Toxiproxy, then each target, installed when missing; exit 2 with one line naming
    what is short."""
    try:
        specs = [parse_target(text) for text in args.target or [DEFAULT_TARGET]]
        install_sdks(workspace_of(args), args.sdk)  # quick, and a release the index lacks is said before the builds
    except (ValueError, InstallError) as exc:
        raise UsageError(str(exc)) from None
    short = provision(workspace_of(args), specs, args.go, log=lambda m: print(m, file=sys.stderr, flush=True))
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

    checks = doctor_mod.run_checks(workspace_of(args), specs, args.go)
    print(doctor_mod.render(checks))
    return EXIT_USAGE if doctor_mod.failed(checks) else EXIT_OK


COMMANDS = {
    "run": cmd_run,
    "confirm": cmd_confirm,
    "check": cmd_check,
    "setup": cmd_setup,
    "doctor": cmd_doctor,
    "replay": cmd_replay,
    "matrix": cmd_matrix,
    "conformance": cmd_conformance,
    "compare": cmd_compare,
    "shrink": cmd_shrink,
}
