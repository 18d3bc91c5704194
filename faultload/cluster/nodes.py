"""What each node of the cluster can hold, and which node runs which worker job.

Every alive node is asked, by a task pinned to it, for the same limits the
local preflight reads (``faultload.host.limits.machine_limits``: open files per
process, ephemeral ports) and for the faultload version it imports, so a node
with another faultload (or none) is refused before a trial starts. The
cluster's limits for ``faultload.run.preflight.plan`` are the smallest of
each: a worker on any node then holds what the plan gives it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from faultload.client.job import WorkerJob
from faultload.cluster.connect import ClusterError
from faultload.host.limits import machine_limits
from faultload.model.target import is_loopback_host
from faultload.version import installed_version

PROBE_TIMEOUT_S = 60.0  # a node's first task may start a worker process (~1-3 s here) or a runtime env


@dataclass(frozen=True)
class Node:
    """One alive node: Ray's id and address, its limits, the faultload it runs."""

    node_id: str
    address: str
    limits: dict[str, int]
    version: str

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.address)


def node_facts() -> dict[str, Any]:
    """Run on a node: its limits and faultload version (Ray imports this module there, so a node without
    faultload fails here)."""
    return {"limits": machine_limits(), "version": installed_version()}


def pinned(ray: ModuleType, node_id: str) -> dict[str, Any]:
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id, soft=False)
    return {"scheduling_strategy": strategy, "num_cpus": 0}


def probe_nodes(ray: ModuleType) -> list[Node]:
    """Every alive node's facts; ClusterError naming a node that cannot run faultload's workers (or runs
    another faultload version than this driver's)."""
    local_version = installed_version()
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if not alive:
        raise ClusterError("--ray: the cluster has no alive node")
    task = ray.remote(node_facts)
    refs = {n["NodeID"]: task.options(**pinned(ray, n["NodeID"])).remote() for n in alive}
    nodes = []
    for info in alive:
        address = info["NodeManagerAddress"]
        try:
            facts = ray.get(refs[info["NodeID"]], timeout=PROBE_TIMEOUT_S)
        except Exception as exc:  # ModuleNotFoundError inside RayTaskError, GetTimeoutError, a dead node ...
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            raise ClusterError(
                f"--ray: node {address} cannot run faultload's workers ({first}); start its "
                "raylet from a Python that has this faultload installed"
            ) from None
        if facts["version"] != local_version:
            raise ClusterError(
                f"--ray: node {address} runs faultload {facts['version']}, this one is "
                f"{local_version}: install the same faultload on every node"
            )
        nodes.append(Node(info["NodeID"], address, facts["limits"], facts["version"]))
    return sorted(nodes, key=lambda n: n.address)


def cluster_limits(nodes: list[Node], local: dict[str, int]) -> dict[str, int]:
    """The limits the preflight plans with: the server's (soft fd limit, somaxconn) from this machine,
    a worker's (open files per process, ephemeral ports) the smallest over the nodes."""
    limits = dict(local)
    for key in ("nofile_hard", "ephemeral_ports"):
        limits[key] = min(n.limits[key] for n in nodes)
    return limits


def place(jobs: list[WorkerJob], nodes: list[Node], target_loopback: bool) -> list[tuple[WorkerJob, Node]]:
    """Each job on a node, round robin; a node off loopback binds its own address, not 127.0.1.x.

    A loopback target is reachable only from this machine, so every node must be on loopback then.
    """
    if target_loopback:
        away = [n.address for n in nodes if not n.loopback]
        if away:
            raise ClusterError(
                f"--ray: node {away[0]} is not on loopback and cannot reach the loopback target; "
                "load a url= target with --allow-remote, or leave that node out of the cluster"
            )
    placed = []
    for i, job in enumerate(jobs):
        node = nodes[i % len(nodes)]
        if not node.loopback:
            job = dataclasses.replace(job, source_ip=node.address)
        placed.append((job, node))
    return placed


def per_node(placed: list[tuple[WorkerJob | None, Node]]) -> dict[str, int]:
    """Worker count per node address (the preflight line prints it)."""
    counts: dict[str, int] = {}
    for _, node in placed:
        counts[node.address] = counts.get(node.address, 0) + 1
    return counts
