"""``--ray`` for run and confirm: join the cluster, fit the trial to its nodes, hand back its pools.

The preflight is the local one (``faultload.run.preflight.plan``) over the
cluster's limits; with ``--workers 0`` (confirm's default) every node gets at
least one worker. A cluster that cannot take the trial is a UsageError: one
line, exit 2, nothing left running.
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from faultload.cli.parser import UsageError
from faultload.cluster.connect import ClusterError, check_reachable, resolve_address
from faultload.cluster.session import RayCluster, join
from faultload.model.target import is_loopback_host, parse_target
from faultload.run.preflight import DoesNotFit, current_limits, plan


def target_is_loopback(target: str) -> bool:
    spec = parse_target(target)
    return spec.kind != "url" or is_loopback_host(urlsplit(spec.url or "").hostname or "")


def _join(args: argparse.Namespace, target_loopback: bool) -> RayCluster:
    try:
        environ = getattr(args, "ray_environ", {})
        check_reachable(resolve_address(args.ray, environ))
        return join(args.ray, args.allow_remote, target_loopback, environ)
    except (ClusterError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def join_rows_cluster(args: argparse.Namespace) -> RayCluster | None:
    """matrix --ray: the joined cluster (None without it); each row launches its target on its node."""
    return _join(args, target_loopback=True) if args.ray else None


def join_for(args: argparse.Namespace) -> RayCluster | None:
    """The joined cluster for ``args.ray`` (None without it), with ``args.workers`` fitted to its nodes."""
    if not args.ray:
        return None
    cluster = _join(args, target_is_loopback(args.target))
    try:
        fit = plan(args.requests, args.max_outstanding, args.workers, cluster.limits(current_limits()))
    except DoesNotFit as exc:
        cluster.close()
        raise UsageError(f"--ray: the trial does not fit the cluster's nodes: {exc}") from None
    workers = max(fit.workers, len(cluster.nodes)) if args.workers == 0 else fit.workers
    for note in fit.notes:
        print(f"faultload: preflight: {note}", file=sys.stderr)
    spread = ", ".join(f"{address}: {n}" for address, n in cluster.spread(workers).items())
    print(f"faultload: preflight: {workers} workers on {len(cluster.nodes)} Ray nodes ({spread})", file=sys.stderr)
    args.workers = workers
    return cluster
