"""The load's options: which build, how many requests, which client, when polls come, what trains beside.

Shared by the one-trial commands (run, confirm) and by compare, which names two builds instead of ``--target``;
apart from :mod:`faultload.cli.parser` so that each group of options reads on its own.
"""

from __future__ import annotations

import argparse

from faultload.cli.parser_base import integer, number, whole_number
from faultload.model.shape import CLIENTS
from faultload.model.target import DEFAULT_TARGET, TARGET_FORMS


def add_load_args(p: argparse.ArgumentParser, build: bool = True) -> None:
    """The load's options, in --help's order; ``build=False`` leaves out ``--target`` (compare names two builds)."""
    _add_size_args(p, build)
    _add_client_args(p)
    _add_timing_args(p)
    _add_training_args(p)


def _add_size_args(p: argparse.ArgumentParser, build: bool) -> None:
    if build:  # compare names two builds instead (--baseline, --candidate)
        p.add_argument("--target", default=DEFAULT_TARGET, metavar="SPEC", help=" | ".join(TARGET_FORMS))
    p.add_argument("--requests", type=whole_number, metavar="N", default=1024, help="sample requests in the trial")
    p.add_argument("--result-tokens", type=whole_number, metavar="N", default=64, help="tokens per sample")
    p.add_argument("--num-samples", type=whole_number, metavar="N", default=1, help="samples per request")
    p.add_argument(
        "--max-outstanding",
        type=whole_number,
        metavar="N",
        default=2000,
        help="SDK-like outstanding cap over all workers; 0 = none",
    )
    p.add_argument(
        "--workers", type=whole_number, metavar="N", default=1, help="load worker processes, each on its own 127.0.1.x"
    )


def _add_client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--client",
        choices=CLIENTS,
        default="raw",
        help="raw: faultload's SDK-shaped client, compiled when built (faultload setup builds it), else the "
        "Python one; raw-python: the Python one always; sdk: the tinker SDK's own sample_async",
    )
    p.add_argument(
        "--sdk",
        default="",
        metavar="tinker==X.Y.Z",
        help="with --client sdk: run this SDK release, installed into a folder of its own when missing "
        "(default: the tinker installed beside faultload, the release the target pins)",
    )
    p.add_argument("--accept", choices=("proto", "json"), default="proto", help="what retrieve_future is asked for")


def _add_timing_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--time-scale", type=number, metavar="X", default=1.0, help="multiply every client and server timer by this"
    )
    p.add_argument(
        "--delay-polls",
        default=None,
        metavar="P@D",
        help="a fraction P of requests first poll D SDK seconds after submit (default: none)",
    )
    p.add_argument(
        "--abandon-polls",
        default=None,
        metavar="P@D",
        help="a fraction P of requests drop their first poll and poll again D SDK seconds later (default: none)",
    )
    p.add_argument(
        "--seed",
        type=integer,
        metavar="N",
        default=0,
        help="seed of the load's random draws (which requests poll late, arrival gaps)",
    )


def _add_training_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trainers",
        default=None,
        metavar="T[xS[:D@N]]",
        help="training beside the samples: T trainers (each its own heartbeating session and LoRA model), "
        "S forward_backward+optim_step steps each (default 1), D data of N tokens per forward_backward "
        "(default 4@128); needs --engine null, the default with --trainers (default: no training)",
    )
    p.add_argument(
        "--training-spread",
        type=number,
        metavar="S",
        default=0.0,
        help="spread the trainers' starts over S SDK seconds (default 0: all at once)",
    )
