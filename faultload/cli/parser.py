"""The ``faultload`` command line's parser: every subcommand, option, help line and value type.

Kept apart from :mod:`faultload.cli.commands` (what each command does) so that
the parser — the CLI's face, its help and its one-line errors — reads on its
own. Light imports only: :mod:`faultload.cli.main` imports it, and load workers
re-import that module in each process.
"""

from __future__ import annotations

import argparse

from faultload.cli.exits import epilog as exit_epilog
from faultload.matrix.rows import DEFAULT_ROWS
from faultload.model.switches import FIXES, REGRESSIONS
from faultload.model.target import DEFAULT_TARGET, TARGET_FORMS
from faultload.model.trial import ENGINES
from faultload.version import installed_version as version

_WORKDIR_HELP = "faultload's folder (default .faultload or $FAULTLOAD_HOME)"
# `faultload run --help` ends with these: each command works as typed (tests/repo/test_reference_docs.py parses them)
RUN_EXAMPLES = """\
examples:
  # a first trial, against the default target (faultload setup installs it)
  faultload setup
  faultload run --requests 2000 --json-out trial.json

  # a SkyRL checkout in ../SkyRL: its backend down for 0.5 s, one second into the load; the JSON report
  faultload setup --target skyrl@../SkyRL
  faultload run --target skyrl@../SkyRL --fault backend:down@1+0.5 --fatal-fault backend:down --json-out fault.json

  # the checkout against its release: the same trial 3 times on each, interleaved; the table as Markdown
  faultload compare --baseline skyrl==0.4.0 --candidate skyrl@../SkyRL --repeats 3 --markdown-out compare.md
"""


class UsageError(Exception):
    """Bad input: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one clear line, exit 2 (argparse prints usage too)
        # "argument --requests: ..." reads as "--requests: ..." (the option first, then what was wrong).
        raise UsageError(message.removeprefix("argument "))


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help already says it or it has none to show (a flag, None, [])."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text, default = action.help or "", action.default
        if "default" in text or default is None or default is argparse.SUPPRESS or isinstance(default, bool) or default == []:
            return text
        return super()._get_help_string(action)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """A text of several lines (an epilog's examples) keeps its lines; one line is wrapped as usual."""
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def _value_type(convert, expectation: str, ok=lambda value: True):
    """An argparse ``type`` whose error reads "expected <expectation>, got 'text'" (argparse names the option)."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expectation}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expectation}, got {text!r}")
        return value

    parse.__name__ = expectation
    return parse


_whole_number = _value_type(int, "a whole number >= 0", lambda value: value >= 0)
_integer = _value_type(int, "a whole number")
_positive_int = _value_type(int, "a whole number >= 1", lambda value: value >= 1)
_number = _value_type(float, "a number")
_seconds = _value_type(float, "a number of seconds >= 0", lambda value: value >= 0)


def _add_trial_args(p: argparse.ArgumentParser) -> None:
    _add_load_args(p)
    _add_router_args(p)
    _add_server_args(p)
    _add_output_args(p)


def _add_load_args(p: argparse.ArgumentParser, build: bool = True) -> None:
    if build:  # compare names two builds instead (--baseline, --candidate)
        p.add_argument("--target", default=DEFAULT_TARGET, metavar="SPEC", help=" | ".join(TARGET_FORMS))
    p.add_argument("--requests", type=_whole_number, metavar="N", default=1024, help="sample requests in the trial")
    p.add_argument("--result-tokens", type=_whole_number, metavar="N", default=64, help="tokens per sample")
    p.add_argument("--num-samples", type=_whole_number, metavar="N", default=1, help="samples per request")
    p.add_argument("--max-outstanding", type=_whole_number, metavar="N", default=2000, help="SDK-like outstanding cap over all workers; 0 = none")
    p.add_argument("--workers", type=_whole_number, metavar="N", default=1, help="load worker processes, each on its own 127.0.1.x")
    p.add_argument("--client", choices=("raw", "sdk"), default="raw",
                   help="raw: faultload's SDK-shaped client; sdk: the tinker SDK's own sample_async")
    p.add_argument("--sdk", default="", metavar="tinker==X.Y.Z",
                   help="with --client sdk: run this SDK release, installed into a folder of its own when missing "
                        "(default: the tinker installed beside faultload, the release the target pins)")
    p.add_argument("--accept", choices=("proto", "json"), default="proto", help="what retrieve_future is asked for")
    p.add_argument("--time-scale", type=_number, metavar="X", default=1.0, help="multiply every client and server timer by this")
    p.add_argument("--delay-polls", default=None, metavar="P@D",
                   help="a fraction P of requests first poll D SDK seconds after submit (default: none)")
    p.add_argument("--abandon-polls", default=None, metavar="P@D",
                   help="a fraction P of requests drop their first poll and poll again D SDK seconds later (default: none)")
    p.add_argument("--seed", type=_integer, metavar="N", default=0, help="seed of the load's random draws (which requests poll late, arrival gaps)")
    p.add_argument("--trainers", default=None, metavar="T[xS[:D@N]]",
                   help="training beside the samples: T trainers (each its own heartbeating session and LoRA model), "
                        "S forward_backward+optim_step steps each (default 1), D data of N tokens per forward_backward "
                        "(default 4@128); needs --engine null, the default with --trainers (default: no training)")
    p.add_argument("--training-spread", type=_number, metavar="S", default=0.0,
                   help="spread the trainers' starts over S SDK seconds (default 0: all at once)")


def _add_router_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--router-mode", choices=("barrier", "latency", "immediate"), default="latency",
                   help="barrier: hold until --barrier are in flight; latency: --max-num-seqs generate at once for "
                        "--gen-seconds each; immediate: answer at once")
    p.add_argument("--barrier", type=_whole_number, metavar="N", default=0, help="barrier mode: wave size; 0 = min(requests, max-outstanding)")
    p.add_argument("--barrier-timeout", type=_number, metavar="S", default=60.0,
                   help="barrier mode: release the held requests after this many seconds")
    # Defaults model an engine slower than the API server, as in production (vLLM's
    # default max_num_seqs, ~1 s per short generation): 256 results/s.
    p.add_argument("--max-num-seqs", type=_whole_number, metavar="N", default=256, help="latency mode: generations at once, as vLLM's max_num_seqs")
    p.add_argument("--gen-seconds", type=_number, metavar="S", default=1.0, help="latency mode: seconds per generation")
    p.add_argument("--router-procs", type=_whole_number, metavar="N", default=0, help="0 = auto: one per 8,000 requests held at once")


def _add_server_args(p: argparse.ArgumentParser, build: bool = True) -> None:
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="the launched server's engine subprocess: sleeper (completes no training request) or null "
                        "(SkyRL's own engine loop over faultload's null model backend) (default: null with "
                        "--trainers, else sleeper)")
    p.add_argument("--engine-seconds-per-token", type=_number, metavar="S", default=0.0,
                   help="null engine: compute time per target token of a training batch (default 0)")
    if build:
        p.add_argument("--regress", action="append", default=[], metavar="NAME",
                       help=f"undo a known upstream fix, or add a catalogued bug, in the launched server: {', '.join(REGRESSIONS)} "
                            "(repeatable; default none)")
        p.add_argument("--fix", action="append", default=[], metavar="NAME",
                       help=f"apply a candidate fix in the launched server: {', '.join(FIXES)} (repeatable; default none)")
    p.add_argument(
        "--fault", action="append", default=[], metavar="LINK:TYPE[:k=v,...][@START+DURATION]",
        help="e.g. edge:reset_peer:timeout=0@5+3, backend:latency:latency=2000,stream=both@0+30, router:stall@5+60, "
             "server:pause@2+10, server:restart@5, router:pause@1+20; START may be an event, "
             "EVENT:K[+OFFSET] (completion, result, poll_timeout: edge:timeout:timeout=0@result:1+0.2+20); "
             "toxics take stream=downstream|upstream|both and toxicity=0..1 (repeatable; default none)",
    )
    p.add_argument("--proxies", choices=("auto", "on", "off"), default="auto", help="route through toxiproxy; auto: when faults are given")
    server_has = "where its version has it (default: the server's)"
    p.add_argument("--forwarding-max-connections", type=_whole_number, metavar="N", default=None,
                   help=f"the server's forwarding_inference_max_connections, {server_has}")
    p.add_argument("--forwarding-timeout", type=_number, metavar="S", default=None,
                   help=f"the server's forwarding_inference_timeout_sec, {server_has}")
    p.add_argument("--retrieved-ttl", type=_number, metavar="S", default=None,
                   help=f"the server's external_future_retrieved_ttl_sec, {server_has}")
    p.add_argument("--server-port", type=_whole_number, metavar="PORT", default=0, help="port of the launched server; 0 = a free one")
    p.add_argument("--server-pid", type=_integer, metavar="PID", default=None, help="pid of a url= server, for process metrics (default: none)")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback url= target")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="a url= target's API key, sent as the tinker SDK sends it (X-API-Key); never printed or "
                        "written to a report (default: $TINKER_API_KEY, else faultload's own)")
    p.add_argument("--header", action="append", default=[], metavar="NAME:VALUE",
                   help="an extra request header for a url= target, e.g. a gateway's (repeatable; default none)")
    p.add_argument("--ca-cert", default=None, metavar="PEM",
                   help="an https url= target's CA certificates to trust (default: the system's)")
    p.add_argument("--insecure", action="store_true",
                   help="an https url= target without checking its certificate (the raw client only)")
    p.add_argument("--max-wall", type=_number, metavar="S", default=1800.0, help="stop the load after this many seconds")
    p.add_argument("--profile-server", default=None, metavar="PATH", help="write a cProfile of the server process (default: none)")


def _add_output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json-out", default=None, metavar="PATH", help="write the JSON report (default: not written)")
    p.add_argument("--junit-xml", default=None, metavar="PATH",
                   help="write a JUnit XML report for CI: a test case for the trial (harness error: error) and one per "
                        "invariant (violated: failure; unknown: skipped) (default: not written)")
    p.add_argument("--plot", default=None, metavar="PNG", help="draw the trial's timeline (default: none; confirm: beside the JSON)")
    p.add_argument("--html", default=None, metavar="PATH",
                   help="write the trial's report as one self-contained HTML file that opens offline: timeline "
                        "with fault windows, verdict table (default: not written)")
    p.add_argument("--history", default=None, metavar="NPZ",
                   help="write the per-request history, compressed numpy (default: none; confirm: beside the JSON)")
    p.add_argument("--bundle", default=None, metavar="DIR",
                   help="write the trial's bundle here, for `faultload check DIR` (default: not written)")
    p.add_argument("--workdir", default=None, metavar="DIR", help=_WORKDIR_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                   help="override one invariant budget, --config's or built in (repeatable; default none)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="read [tool.faultload.*] from this TOML file: this command's options ([tool.faultload.options.run], "
                        "[tool.faultload.options.confirm]; typed ones win), budgets, watchdog limits (default: the nearest "
                        "pyproject.toml with a [tool.faultload] table, from here upward)")
    p.add_argument("--fatal-fault", action="append", default=[], metavar="KIND",
                   help="fault kind whose victims may give up, e.g. router:crash (repeatable; default none)")
    p.add_argument("--no-early-stop", action="store_true", help="do not stop the trial on a recognised collapse (the verdict is still computed)")
    p.add_argument("--ray", default=None, metavar="HOST:PORT",
                   help="run the load workers as actors on this Ray cluster (auto: RAY_ADDRESS), spread over its "
                        "nodes; needs the ray extra (default: local worker processes)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="faultload", description="Fault-injection and load suite for Tinker-API servers",
                     allow_abbrev=False, formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"faultload {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub_parser = sub.add_parser

    def add_parser(name: str, **kw):  # no prefix matching: `--request 10` must not mean --requests
        kw.setdefault("description", kw.get("help"))
        kw["epilog"] = (kw["epilog"].rstrip("\n") + "\n\n" if kw.get("epilog") else "") + exit_epilog()
        return sub_parser(name, allow_abbrev=False, formatter_class=_HelpFormatter, **kw)

    sub.add_parser = add_parser
    _add_trial_args(sub.add_parser("run", help="run one load trial and report it", epilog=RUN_EXAMPLES))
    confirm = sub.add_parser("confirm", help="the full-size run (131,072 requests), fitted to this machine",
                             description="the full-size run (131,072 requests), fitted to this machine: "
                                         "--max-outstanding 0 and --workers 0 (its defaults) are chosen by the preflight")
    _add_trial_args(confirm)
    confirm.set_defaults(
        requests=131_072, router_mode="latency", max_num_seqs=256, gen_seconds=1.0, max_outstanding=0, workers=0,
    )
    _add_replay_args(sub.add_parser("replay", help="run a repro file's trial again on a fresh stack"))
    _add_check_args(sub.add_parser("check", help="judge a stored trial bundle again, offline (run --bundle DIR)"))
    _add_shrink_args(sub.add_parser("shrink", help="reduce a failed trial to a smaller one that still fails, "
                                                   "and write its repro for `faultload replay`"))
    _add_compare_args(sub.add_parser("compare", help="the same trial on two builds, interleaved: ratios with intervals"))
    _add_matrix_args(sub.add_parser("matrix", help="run the suite over (target, regression) rows: caught or clean as expected?"))
    for name, help_, verb in (("setup", "build Toxiproxy and install target venvs, each when missing (idempotent)", "install"),
                              ("doctor", "check the machine and the installed parts", "check")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--target", action="append", default=[], metavar="SPEC",
                       help=f"a target to {verb} (repeatable; default {DEFAULT_TARGET})")
        if name == "setup":
            p.add_argument("--sdk", action="append", default=[], metavar="tinker==X.Y.Z",
                           help="an SDK release for --client sdk --sdk, installed into a folder of its own "
                                "(repeatable; default none)")
        p.add_argument("--workdir", default=None, metavar="DIR", help=_WORKDIR_HELP)
    return parser


def _add_replay_args(replay: argparse.ArgumentParser) -> None:
    replay.add_argument("file", metavar="FILE",
                        help="a repro JSON written by the suite (pytest --pyargs faultload.suite) or `faultload shrink`; or a property's name "
                             "(test_no_lost_results: its newest repro in the workspace); or the name of a finding's "
                             "repro faultload ships (half_open_delivery-0.4.0)")
    replay.add_argument("--json-out", default=None, metavar="PATH",
                        help="write the replayed trial's JSON report; with --repeats N, one per run, "
                             "PATH's stem + -1 .. -N (default: not written)")
    replay.add_argument("--html", default=None, metavar="PATH",
                        help="write the replayed trial's report as one HTML page (a comparison's: its table); with "
                             "--repeats N, one per run, as --json-out (default: not written)")
    replay.add_argument("--repeats", type=_positive_int, default=1, metavar="N",
                        help="run it N times, each on a fresh stack, and say how many reproduced it: exit 1 if any "
                             "did")
    replay.add_argument("--target", default=None, metavar="SPEC",
                        help="replay against this build instead of the repro's, e.g. a fixed checkout: skyrl@PATH "
                             "(default: the repro's)")
    replay.add_argument("--fix", action="append", default=[], metavar="NAME",
                        help=f"apply a candidate fix in the launched server: {', '.join(FIXES)} (repeatable; default none)")
    replay.add_argument("--workdir", default=None, metavar="DIR", help=_WORKDIR_HELP)


def _add_shrink_args(shrink: argparse.ArgumentParser) -> None:
    shrink.add_argument("source", metavar="SOURCE",
                        help="the failed trial: a bundle (run --bundle DIR), a JSON report (run --json-out) or a repro")
    shrink.add_argument("--max-trials", type=_whole_number, metavar="N", default=20,
                        help="run at most N reduction trials, each on a fresh stack")
    shrink.add_argument("--time-limit", type=_seconds, metavar="S", default=1800.0,
                        help="start no reduction trial after S seconds")
    shrink.add_argument("--out", default=None, metavar="DIR",
                        help="where the repro goes (default: the workspace's repros folder)")
    shrink.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                        help="override one budget the trials are judged by (repeatable; default: the source's, "
                             "else the nearest pyproject.toml's)")
    shrink.add_argument("--config", default=None, metavar="PYPROJECT",
                        help="read [tool.faultload.budgets] from this file when the source keeps no budgets "
                             "(a JSON report; default: the nearest pyproject.toml with a [tool.faultload] table)")
    shrink.add_argument("--workdir", default=None, metavar="DIR", help=_WORKDIR_HELP)
    shrink.add_argument("--quiet", action="store_true", help="no progress lines")


def _add_check_args(check: argparse.ArgumentParser) -> None:
    check.add_argument("bundle", metavar="BUNDLE", help="a trial bundle: `faultload run --bundle DIR`, or beside a suite repro")
    check.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                       help="override one of the bundle's budgets (repeatable; default: judge with the stored budgets)")
    check.add_argument("--json-out", default=None, metavar="PATH",
                       help="write the verdicts and the budgets used as JSON (default: not written)")


def _add_compare_args(p: argparse.ArgumentParser) -> None:
    build_help = (
        "a build: a target plus switches, e.g. skyrl==0.4.0, skyrl==0.4.0+regress=rich-access-log, "
        "skyrl@PATH+fix=NAME (required; no default)")
    p.add_argument("--baseline", required=True, metavar="BUILD", help=build_help)
    p.add_argument("--candidate", required=True, metavar="BUILD", help=build_help)
    p.add_argument("--repeats", type=_integer, metavar="N", default=5, help="trials per build, run in ABBA order")
    _add_load_args(p, build=False)
    _add_router_args(p)
    _add_server_args(p, build=False)
    p.add_argument("--json-out", default=None, metavar="PATH", help="write the result, faultload.compare/1 (default: not written)")
    p.add_argument("--junit-xml", default=None, metavar="PATH",
                   help="write a JUnit XML report for CI: a test case per metric (worse: failure; unknown: skipped) "
                        "and per trial (failed to run: error) (default: not written)")
    p.add_argument("--markdown-out", default=None, metavar="PATH", help="write the table as Markdown (default: not written)")
    p.add_argument("--html", default=None, metavar="PATH",
                   help="write the comparison as one self-contained HTML file that opens offline: the ratios with "
                        "their intervals against the thresholds, the table, each side's trials (default: not written)")
    p.add_argument("--plot", default=None, metavar="PNG", help="draw both sides' timelines and the ratios (default: none)")
    p.add_argument("--trials-out", default=None, metavar="DIR", help="write each trial's JSON report here (default: not written)")
    p.add_argument("--workdir", default=None, metavar="DIR", help=_WORKDIR_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE",
                   help="override one invariant budget the trials are judged by (repeatable; default none)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="read [tool.faultload.*] from this TOML file: this command's options "
                        "([tool.faultload.options.compare]; typed ones win), compare thresholds, budgets (default: "
                        "the nearest pyproject.toml with a [tool.faultload] table)")
    p.add_argument("--fatal-fault", action="append", default=[], metavar="KIND",
                   help="fault kind whose victims may give up, e.g. router:crash (repeatable; default none)")
    p.add_argument("--no-early-stop", action="store_true", help="do not stop a trial on a recognised collapse")


def _add_matrix_args(matrix: argparse.ArgumentParser) -> None:
    matrix.add_argument("--profile", default="ci", choices=("ci", "nightly"), help="the suite profile for every row")
    matrix.add_argument("--rows", default=None, metavar="A,B",
                        help=f"rows to run, in order (default all: {', '.join(row.name for row in DEFAULT_ROWS)})")
    matrix.add_argument("--all-properties", action="store_true",
                        help="run every property of a row, not only up to its first failure")
    matrix.add_argument("--session-s", default=None, type=_seconds, metavar="S",
                        help="each row's session starts no trial after S seconds (default: the profile's); "
                             "a row left with too few judged trials is 'error: not judged'")
    matrix.add_argument("--json-out", default=None, metavar="PATH", help="write the result, faultload.matrix/1 (default: not written)")
    matrix.add_argument("--junit-xml", default=None, metavar="PATH",
                        help="write a JUnit XML report for CI: a test case per row (not as expected: failure; error, "
                             "not judged included: error) and per invariant of a row (not judged: skipped) "
                             "(default: not written)")
    matrix.add_argument("--markdown-out", default=None, metavar="PATH",
                        help="write the table as Markdown, the README's (default: not written)")
    matrix.add_argument("--html", default=None, metavar="PATH",
                        help="write the matrix as one self-contained HTML file that opens offline: each row's "
                             "expected and actual result, repro and wall time, the rows x invariants grid "
                             "(default: not written)")
    matrix.add_argument("--ray", default=None, metavar="HOST:PORT",
                        help="spread the rows over this Ray cluster's nodes, one row per node at a time (auto: "
                             "RAY_ADDRESS); every node must have this faultload and its workspace (default: one "
                             "row after another here)")
    matrix.add_argument("--allow-remote", action="store_true", help="allow a --ray cluster off loopback")
    matrix.add_argument("--logs", default=None, metavar="DIR",
                        help="where each row's pytest log and summary go (default .faultload/matrix/TIME)")
