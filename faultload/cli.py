"""``faultload`` command line: run | setup | doctor.

Exit codes: 0 all good, 1 a trial failed (requests lost/failed, or an
invariant violated), 2 bad usage or setup, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Sequence

# Only light modules at the top: load workers are spawned processes that import
# this module again (as __mp_main__), and each heavy import here costs every worker.
from faultload.checker.budgets import load_budgets
from faultload.faults.spec import FaultSchedule
from faultload.procutil import Interrupts
from faultload.shape import ClientPolicy, LoadShape, parse_poll_behaviour
from faultload.targets.spec import DEFAULT_TARGET, parse_target
from faultload.watchdog import load_watchdog_limits
from faultload.workspace import Workspace

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Connections one router process holds at most (the per-process open-file limit is 20,000).
ROUTER_CONNECTIONS_PER_PROC = 8000


class UsageError(Exception):
    """Bad input: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, exit 2 (argparse prints usage too)
        raise UsageError(message)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of seconds, got {text}")
    return value


def _add_trial_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=DEFAULT_TARGET, help="skyrl==X.Y.Z | skyrl@PATH | url=http://127.0.0.1:PORT")
    p.add_argument("--requests", type=_positive_int, default=1024)
    p.add_argument("--result-tokens", type=_positive_int, default=64)
    p.add_argument("--num-samples", type=_positive_int, default=1)
    p.add_argument("--max-outstanding", type=_positive_int, default=2000, help="SDK-like outstanding cap over all workers; 0 = none")
    p.add_argument("--workers", type=_positive_int, default=1, help="load worker processes, each on its own 127.0.1.x")
    p.add_argument("--client", choices=("raw", "sdk"), default="raw")
    p.add_argument("--accept", choices=("proto", "json"), default="proto")
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--delay-polls", default=None, metavar="P@D")
    p.add_argument("--abandon-polls", default=None, metavar="P@D")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--router-mode", choices=("barrier", "latency", "immediate"), default="latency")
    p.add_argument("--barrier", type=_positive_int, default=0, help="barrier size (default: min(requests, max-outstanding))")
    p.add_argument("--barrier-timeout", type=float, default=60.0)
    # Defaults model an engine slower than the API server, as in production (vLLM's
    # default max_num_seqs, ~1 s per short generation): 256 results/s.
    p.add_argument("--max-num-seqs", type=_positive_int, default=256)
    p.add_argument("--gen-seconds", type=float, default=1.0)
    p.add_argument("--router-procs", type=_positive_int, default=0, help="0 = auto: one per 8,000 requests held at once")
    p.add_argument("--regress", action="append", default=[], metavar="NAME",
                   help="undo a known upstream fix in the launched server: retention, keepalive, rich-access-log")
    p.add_argument("--fix", action="append", default=[], metavar="NAME",
                   help="apply a candidate fix in the launched server: plain-tracebacks")
    p.add_argument(
        "--fault", action="append", default=[], metavar="LINK:TYPE[:k=v,...][@START+DURATION]",
        help="e.g. edge:reset_peer:timeout=0@5+3, backend:latency:latency=2000@0+30, router:stall@5+60",
    )
    p.add_argument("--proxies", choices=("auto", "on", "off"), default="auto", help="route through toxiproxy (auto: when faults are given)")
    p.add_argument("--forwarding-max-connections", type=_positive_int, default=None)
    p.add_argument("--forwarding-timeout", type=float, default=None)
    p.add_argument("--retrieved-ttl", type=float, default=None)
    p.add_argument("--server-port", type=_positive_int, default=0)
    p.add_argument("--server-pid", type=int, default=None, help="pid of a url= server, for process metrics")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback url= target")
    p.add_argument("--max-wall", type=float, default=1800.0, help="stop the load after this many seconds")
    p.add_argument("--profile-server", default=None, metavar="PATH", help="write a cProfile of the server process")
    p.add_argument("--json-out", default=None, metavar="PATH")
    p.add_argument("--plot", default=None, metavar="PNG", help="draw the trial's timeline (confirm: beside the JSON)")
    p.add_argument("--history", default=None, metavar="NPZ", help="write the per-request history (compressed numpy)")
    p.add_argument("--workdir", default=None, help="faultload's folder (default .faultload or $FAULTLOAD_HOME)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE", help="override one invariant budget")
    p.add_argument("--config", default=None, metavar="PYPROJECT", help="read [tool.faultload.*] from this file (default ./pyproject.toml if present)")
    p.add_argument("--fatal-fault", action="append", default=[], metavar="KIND", help="fault kind whose victims may give up (e.g. router:crash)")
    p.add_argument("--no-early-stop", action="store_true", help="do not stop the trial on a recognised collapse (the verdict is still computed)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="faultload", description="Fault-injection and load suite for Tinker-API servers", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub_parser = sub.add_parser

    def add_parser(name: str, **kw):  # no prefix matching: `--request 10` must not mean --requests
        return sub_parser(name, allow_abbrev=False, **kw)

    sub.add_parser = add_parser
    _add_trial_args(sub.add_parser("run", help="run one load trial and report it"))
    confirm = sub.add_parser("confirm", help="the full-size run (131,072 requests), fitted to this machine")
    _add_trial_args(confirm)
    confirm.set_defaults(
        requests=131_072, router_mode="latency", max_num_seqs=256, gen_seconds=1.0, max_outstanding=0, workers=0,
    )
    replay = sub.add_parser("replay", help="run a repro file's trial again on a fresh stack")
    replay.add_argument("file", metavar="FILE", help="a repro JSON written by `pytest faultload`")
    replay.add_argument("--json-out", default=None, metavar="PATH")
    replay.add_argument("--target", default=None, metavar="SPEC",
                        help="replay against this build instead of the repro's (e.g. a fixed checkout: skyrl@PATH)")
    replay.add_argument("--fix", action="append", default=[], metavar="NAME",
                        help="apply a candidate fix in the launched server: plain-tracebacks")
    replay.add_argument("--workdir", default=None)
    matrix = sub.add_parser("matrix", help="run the suite over (target, regression) rows: caught or clean as expected?")
    matrix.add_argument("--profile", default="ci", choices=("ci", "nightly"), help="the suite profile for every row")
    matrix.add_argument("--rows", default=None, metavar="A,B",
                        help="rows to run, in order (default all: clean, fixed, retention, keepalive, rich-access-log, skyrl-0.3.0)")
    matrix.add_argument("--all-properties", action="store_true",
                        help="run every property of a row, not only up to its first failure")
    matrix.add_argument("--session-s", default=None, type=_non_negative_float, metavar="S",
                        help="each row's session starts no trial after S seconds (default: the profile's); "
                             "a row left with too few judged trials is 'error: not judged'")
    matrix.add_argument("--json-out", default=None, metavar="PATH")
    matrix.add_argument("--markdown-out", default=None, metavar="PATH", help="write the table as Markdown (the README's)")
    matrix.add_argument("--logs", default=None, metavar="DIR",
                        help="where each row's pytest log and summary go (default .faultload/matrix/TIME)")
    setup = sub.add_parser("setup", help="install target venvs (idempotent)")
    setup.add_argument("--target", action="append", default=[])
    setup.add_argument("--workdir", default=None)
    doc = sub.add_parser("doctor", help="check the machine and the installed parts")
    doc.add_argument("--target", action="append", default=[])
    doc.add_argument("--workdir", default=None)
    return parser


def _workspace(args: argparse.Namespace) -> Workspace:
    return Workspace(Path(args.workdir).resolve()) if args.workdir else Workspace.default()


def config_from_args(args: argparse.Namespace):
    """Build and validate a TrialConfig from parsed args (ValueError on bad input)."""
    from faultload.router import RouterConfig
    from faultload.stack import ServerKnobs
    from faultload.trial import TrialConfig

    shape = LoadShape(
        requests=args.requests, result_tokens=args.result_tokens, num_samples=args.num_samples,
        max_outstanding=args.max_outstanding, workers=args.workers, client=args.client, accept=args.accept,
        time_scale=args.time_scale, seed=args.seed, policy=ClientPolicy(),
        delay_polls=parse_poll_behaviour(args.delay_polls, "--delay-polls") if args.delay_polls else LoadShape().delay_polls,
        abandon_polls=parse_poll_behaviour(args.abandon_polls, "--abandon-polls") if args.abandon_polls else LoadShape().abandon_polls,
    )
    barrier = args.barrier
    if args.router_mode == "barrier" and barrier == 0:
        cap = args.max_outstanding or args.requests
        barrier = min(args.requests, cap)
    held = barrier if args.router_mode == "barrier" else (args.max_outstanding or args.requests)
    procs = args.router_procs or max(1, math.ceil(min(held, args.requests) / ROUTER_CONNECTIONS_PER_PROC))
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
    )
    config.validate()
    return config


def _config_path(args: argparse.Namespace) -> Path | None:
    """The pyproject.toml holding [tool.faultload.*] settings: --config, or ./pyproject.toml."""
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise ValueError(f"--config {args.config}: no such file")
        return path
    default = Path("pyproject.toml")
    return default if default.is_file() else None


def _build(args: argparse.Namespace):
    """(config, budgets) from args; UsageError on bad input."""
    try:
        return config_from_args(args), load_budgets(_config_path(args), args.budget)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run_and_report(args: argparse.Namespace, config, budgets) -> int:
    """Run one trial, judge it, print and write what was asked; the exit code."""
    from faultload import report as report_mod
    from faultload.checker.judge import judge
    from faultload.progress import ProgressLine
    from faultload.targets.install import InstallError
    from faultload.targets.server import ServerStartError
    from faultload.trial import run_trial

    progress = None if args.quiet else ProgressLine(config.shape.requests, sys.stderr)
    try:
        result = run_trial(config, _workspace(args), progress=progress)
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
    if _write_extras(args, result, report) and args.json_out:
        report_mod.write_json(report, args.json_out)
    print(report_mod.render_text(report))
    if result.interrupted:
        return EXIT_INTERRUPTED
    if result.error or any(v.ok is False for v in verdicts) or report["completed"] < report["requested"]:
        return EXIT_FAILED
    return EXIT_OK


def _write_extras(args: argparse.Namespace, result, report: dict) -> bool:
    """The history and plot asked for, their paths into ``report``; True if it changed.

    Without matplotlib the plot is skipped with one line saying why (and
    ``plot_skipped`` in the report); the run's exit code does not change.
    """
    changed = False
    if args.history:
        result.history.save(args.history)
        report["history_path"] = str(args.history)
        changed = True
    if args.plot:
        from faultload.plot import PlotUnavailable, write_timeline

        try:
            report["plot_path"] = str(write_timeline(result, args.plot))
        except PlotUnavailable as exc:
            report["plot_skipped"] = str(exc)
            print(f"faultload: plot skipped: {exc}", file=sys.stderr)
        changed = True
    return changed


def cmd_run(args: argparse.Namespace) -> int:
    config, budgets = _build(args)
    return _run_and_report(args, config, budgets)


def cmd_confirm(args: argparse.Namespace) -> int:
    """The full-size run: fit it to the machine first, say what changed, then run and judge it."""
    from faultload.preflight import DoesNotFit, current_limits, plan

    try:
        limits = current_limits()
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
    return _run_and_report(args, config, budgets)


def cmd_replay(args: argparse.Namespace) -> int:
    """Run a repro file again: 1 if its failure reproduces, 0 if not (reported as flaky)."""
    from faultload.repro import replay
    from faultload.targets.install import InstallError
    from faultload.targets.server import ServerStartError

    try:
        return replay(args.file, _workspace(args), args.json_out, target=args.target, fixes=tuple(args.fix))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except (ServerStartError, InstallError, RuntimeError, OSError) as exc:
        print(f"faultload: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("faultload: interrupted; everything stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


def cmd_matrix(args: argparse.Namespace) -> int:
    """0 when every row came out as expected, 1 otherwise."""
    from faultload import matrix as matrix_mod

    try:
        rows = matrix_mod.select_rows([n.strip() for n in args.rows.split(",") if n.strip()] if args.rows else None)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for option in ("json_out", "markdown_out"):
        path = getattr(args, option)
        if path and not Path(path).resolve().parent.is_dir():
            raise UsageError(f"--{option.replace('_', '-')}: no such directory: {Path(path).parent}")
    logs = Path(args.logs).resolve() if args.logs else None

    def log(message: str) -> None:
        print(f"faultload matrix: {message}", file=sys.stderr, flush=True)

    try:
        result = matrix_mod.run_matrix(rows, args.profile, all_properties=args.all_properties, workdir=logs, log=log,
                                       session_s=args.session_s)
    except KeyboardInterrupt:
        print("faultload: interrupted; every row's session stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    table = matrix_mod.markdown_table(result)
    print(table)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
    if args.markdown_out:
        Path(args.markdown_out).write_text(table)
    return EXIT_OK if result["ok"] else EXIT_FAILED


def cmd_setup(args: argparse.Namespace) -> int:
    from faultload.targets.install import InstallError, ensure_target

    targets = args.target or [DEFAULT_TARGET]
    workspace = _workspace(args)
    for text in targets:
        try:
            spec = parse_target(text)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if spec.kind == "url":
            continue
        try:
            ensure_target(workspace.targets, spec, log=lambda m: print(m, file=sys.stderr, flush=True))
        except InstallError as exc:
            print(f"faultload: {exc}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    targets = args.target or [DEFAULT_TARGET]
    try:
        specs = [parse_target(t) for t in targets]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from faultload import doctor as doctor_mod

    checks = doctor_mod.run_checks(_workspace(args), specs)
    print(doctor_mod.render(checks))
    return EXIT_USAGE if doctor_mod.failed(checks) else EXIT_OK


COMMANDS = {"run": cmd_run, "confirm": cmd_confirm, "setup": cmd_setup, "doctor": cmd_doctor, "replay": cmd_replay,
            "matrix": cmd_matrix}


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM (CI cancelling, `timeout`, kill) and SIGHUP (a closed terminal) take
    # the Ctrl-C path, so cleanup runs and the partial report is written; a
    # second one kills every child at once.
    interrupts = Interrupts(EXIT_INTERRUPTED).install()
    try:
        args = _parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"faultload: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # between the steps that catch it (parsing, judging, writing the report)
        print("faultload: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        interrupts.uninstall()


if __name__ == "__main__":
    sys.exit(main())
