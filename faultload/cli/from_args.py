"""Values built from the parsed command line: the workspace, a trial's config and budgets, the settings file;
output folders checked before any work; and how a command's work failing becomes an exit code."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faultload.checker.budgets import load_budgets
from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS, EXIT_INTERRUPTED, EXIT_USAGE
from faultload.cli.parser import UsageError
from faultload.client.session import AccessRefused, SessionUnreadable
from faultload.host.settings import find_config
from faultload.host.workspace import Workspace
from faultload.model.access import Access, access_for
from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig, procs_for
from faultload.model.shape import ClientPolicy, LoadShape, parse_poll_behaviour
from faultload.model.training import TrainingMix, parse_training
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.run.watchdog import load_watchdog_limits
from faultload.targets.install import InstallError, ensure_sdk_release
from faultload.targets.server import ServerStartError


def workspace_of(args: argparse.Namespace) -> Workspace:
    """--workdir, else $FAULTLOAD_HOME (read by :func:`main` into ``args.home``), else ./.faultload."""
    return Workspace.default(args.workdir or args.home)


def config_from_args(args: argparse.Namespace):
    """Build and validate a TrialConfig from parsed args (ValueError on bad input)."""

    shape = LoadShape(
        requests=args.requests,
        result_tokens=args.result_tokens,
        num_samples=args.num_samples,
        max_outstanding=args.max_outstanding,
        workers=args.workers,
        client=args.client,
        sdk=args.sdk,
        accept=args.accept,
        time_scale=args.time_scale,
        seed=args.seed,
        policy=ClientPolicy(),
        delay_polls=parse_poll_behaviour(args.delay_polls, "--delay-polls")
        if args.delay_polls
        else LoadShape().delay_polls,
        abandon_polls=parse_poll_behaviour(args.abandon_polls, "--abandon-polls")
        if args.abandon_polls
        else LoadShape().abandon_polls,
        training=training_from_args(args),
    )
    barrier = args.barrier
    if args.router_mode == "barrier" and barrier == 0:
        cap = args.max_outstanding or args.requests
        barrier = min(args.requests, cap)
    held = barrier if args.router_mode == "barrier" else (args.max_outstanding or args.requests)
    procs = args.router_procs or procs_for(min(held, args.requests))
    router = RouterConfig(
        mode=args.router_mode,
        barrier=barrier,
        barrier_timeout_s=args.barrier_timeout,
        max_num_seqs=args.max_num_seqs,
        gen_seconds=args.gen_seconds,
        procs=procs,
    )
    knobs = ServerKnobs(args.forwarding_max_connections, args.forwarding_timeout, args.retrieved_ttl)
    faults = FaultSchedule.parse(args.fault)
    config = TrialConfig(
        target=args.target,
        shape=shape,
        router=router,
        regress=tuple(args.regress),
        fixes=tuple(args.fix),
        knobs=knobs,
        faults=faults,
        proxies=args.proxies,
        allow_remote=args.allow_remote,
        server_pid=args.server_pid,
        server_port=args.server_port,
        max_wall_s=args.max_wall,
        profile_server=args.profile_server,
        early_stop=not args.no_early_stop,
        fatal_faults=tuple(args.fatal_fault),
        watchdog=load_watchdog_limits(config_path(args)),
        engine=args.engine or ("null" if shape.training.enabled else "sleeper"),
        engine_s_per_token=args.engine_seconds_per_token,
    )
    config.validate()
    return config


def access_from_args(args: argparse.Namespace, config) -> Access:
    """How the load reaches ``config``'s server (:func:`faultload.model.access.access_for`), ``$TINKER_API_KEY``
    read by :func:`main` into ``args.env_api_key``. ValueError on bad input."""
    return access_for(
        config.spec.url if config.spec.kind == "url" else None,
        api_key=args.api_key,
        env_api_key=getattr(args, "env_api_key", None),
        headers=args.header,
        ca_cert=args.ca_cert,
        insecure=args.insecure,
        sdk_client=config.shape.client == "sdk",
    )


def training_from_args(args: argparse.Namespace) -> TrainingMix:
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


def config_path(args: argparse.Namespace) -> Path | None:
    """The pyproject.toml holding [tool.faultload.*] settings (:func:`faultload.host.settings.find_config`
    from the current directory: --config, or the nearest with a [tool.faultload] table)."""
    return find_config(Path.cwd(), args.config or None)


def build_trial(args: argparse.Namespace):
    """(config, budgets) from args; UsageError on bad input (the outputs were checked by ``cli.main``);
    ``args.access`` set to how the load reaches the server (:func:`access_from_args`)."""
    try:
        config, budgets = config_from_args(args), load_budgets(config_path(args), args.budget)
        args.access = access_from_args(args, config)
        if config.shape.sdk:
            install_sdks(workspace_of(args), [config.shape.sdk])
    except (ValueError, InstallError) as exc:
        raise UsageError(str(exc)) from None
    return config, budgets


def install_sdks(workspace: Workspace, releases: list[str]) -> None:
    """Each SDK release (``tinker==X.Y.Z``) installed when missing, saying so on stderr; ValueError or
    InstallError in one line (a malformed name, a release the index lacks, a failed install: nothing left)."""
    for release in releases:
        ensure_sdk_release(workspace.sdks, release, log=lambda m: print(f"faultload: {m}", file=sys.stderr, flush=True))


def guarded(work: Callable[[], Any], interrupted: str) -> tuple[Any, int | None]:
    """(what ``work`` returned, None), or (None, the exit code) when it could not run: a bad value is a
    UsageError; a server that did not start, an install that failed: one line, exit 2; the harness breaking
    (a load worker lost, an OS error): one line, exit 3; a server whose session answer the SDK cannot read:
    one line, exit 1; Ctrl-C: ``interrupted``, exit 130 (what it started
    is stopped by then)."""
    try:
        return work(), None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except (ServerStartError, InstallError, AccessRefused) as exc:
        print(f"faultload: {exc}", file=sys.stderr)
        return None, EXIT_USAGE
    except SessionUnreadable as exc:
        print(f"faultload: the server is at fault: {exc}", file=sys.stderr)
        return None, EXIT_FAILED
    except (RuntimeError, OSError) as exc:
        print(f"faultload: harness error: {exc}", file=sys.stderr)
        return None, EXIT_HARNESS
    except KeyboardInterrupt:
        print(f"faultload: {interrupted}", file=sys.stderr)
        return None, EXIT_INTERRUPTED
