"""The stack's options: the fake router's pace, and the server's — its engine, switches, faults, knobs, and how a
url= target is reached.

Shared by the one-trial commands (run, confirm) and by compare, which names its switches in each build instead of
``--regress``/``--fix``; apart from :mod:`faultload.cli.parser` so that each group of options reads on its own.
"""

from __future__ import annotations

import argparse

from faultload.cli.parser_base import integer, number, whole_number
from faultload.model.switches import FIXES, REGRESSIONS
from faultload.model.trial import ENGINES


def add_router_args(p: argparse.ArgumentParser) -> None:
    """The fake vLLM router's options: how it holds or paces the generations it is asked for."""
    p.add_argument(
        "--router-mode",
        choices=("barrier", "latency", "immediate"),
        default="latency",
        help="barrier: hold until --barrier are in flight; latency: --max-num-seqs generate at once for "
        "--gen-seconds each; immediate: answer at once",
    )
    p.add_argument(
        "--barrier",
        type=whole_number,
        metavar="N",
        default=0,
        help="barrier mode: wave size; 0 = min(requests, max-outstanding)",
    )
    p.add_argument(
        "--barrier-timeout",
        type=number,
        metavar="S",
        default=60.0,
        help="barrier mode: release the held requests after this many seconds",
    )
    # Defaults model an engine slower than the API server, as in production (vLLM's
    # default max_num_seqs, ~1 s per short generation): 256 results/s.
    p.add_argument(
        "--max-num-seqs",
        type=whole_number,
        metavar="N",
        default=256,
        help="latency mode: generations at once, as vLLM's max_num_seqs",
    )
    p.add_argument("--gen-seconds", type=number, metavar="S", default=1.0, help="latency mode: seconds per generation")
    p.add_argument(
        "--router-procs",
        type=whole_number,
        metavar="N",
        default=0,
        help="0 = auto: one per 8,000 requests held at once",
    )


def add_server_args(p: argparse.ArgumentParser, build: bool = True) -> None:
    """The server's options, in --help's order; ``build=False`` leaves out ``--regress`` and ``--fix`` (compare
    names them in each build)."""
    _add_engine_args(p)
    if build:
        _add_switch_args(p)
    _add_fault_args(p)
    _add_server_knob_args(p)
    _add_url_target_args(p)
    p.add_argument("--max-wall", type=number, metavar="S", default=1800.0, help="stop the load after this many seconds")
    p.add_argument(
        "--profile-server", default=None, metavar="PATH", help="write a cProfile of the server process (default: none)"
    )


def _add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="the launched server's engine subprocess: sleeper (completes no training request) or null "
        "(SkyRL's own engine loop over faultload's null model backend) (default: null with "
        "--trainers, else sleeper)",
    )
    p.add_argument(
        "--engine-seconds-per-token",
        type=number,
        metavar="S",
        default=0.0,
        help="null engine: compute time per target token of a training batch (default 0)",
    )


def _add_switch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--regress",
        action="append",
        default=[],
        metavar="NAME",
        help=f"undo a known upstream fix, or add a catalogued bug, in the launched server: {', '.join(REGRESSIONS)} "
        "(repeatable; default none)",
    )
    p.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME",
        help=f"apply a candidate fix in the launched server: {', '.join(FIXES)} (repeatable; default none)",
    )


def _add_fault_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="LINK:TYPE[:k=v,...][@START+DURATION]",
        help="e.g. edge:reset_peer:timeout=0@5+3, backend:latency:latency=2000,stream=both@0+30, router:stall@5+60, "
        "server:pause@2+10, server:restart@5, router:pause@1+20; START may be an event, "
        "EVENT:K[+OFFSET] (completion, result, poll_timeout: edge:timeout:timeout=0@result:1+0.2+20); "
        "toxics take stream=downstream|upstream|both and toxicity=0..1 (repeatable; default none)",
    )
    p.add_argument(
        "--proxies",
        choices=("auto", "on", "off"),
        default="auto",
        help="route through toxiproxy; auto: when faults are given",
    )


def _add_server_knob_args(p: argparse.ArgumentParser) -> None:
    server_has = "where its version has it (default: the server's)"
    p.add_argument(
        "--forwarding-max-connections",
        type=whole_number,
        metavar="N",
        default=None,
        help=f"the server's forwarding_inference_max_connections, {server_has}",
    )
    p.add_argument(
        "--forwarding-timeout",
        type=number,
        metavar="S",
        default=None,
        help=f"the server's forwarding_inference_timeout_sec, {server_has}",
    )
    p.add_argument(
        "--retrieved-ttl",
        type=number,
        metavar="S",
        default=None,
        help=f"the server's external_future_retrieved_ttl_sec, {server_has}",
    )
    p.add_argument(
        "--server-port",
        type=whole_number,
        metavar="PORT",
        default=0,
        help="port of the launched server; 0 = a free one",
    )


def _add_url_target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server-pid",
        type=integer,
        metavar="PID",
        default=None,
        help="pid of a url= server, for process metrics (default: none)",
    )
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback url= target")
    p.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help="a url= target's API key, sent as the tinker SDK sends it (X-API-Key); never printed or "
        "written to a report (default: $TINKER_API_KEY, else faultload's own)",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="an extra request header for a url= target, e.g. a gateway's (repeatable; default none)",
    )
    p.add_argument(
        "--ca-cert",
        default=None,
        metavar="PEM",
        help="an https url= target's CA certificates to trust (default: the system's)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="an https url= target without checking its certificate (the raw client only)",
    )
