"""A joined cluster, as the CLI and the suite hold it for a run: its nodes, and a pool per trial."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Mapping

from faultload.client.job import WorkerJob
from faultload.cluster.connect import connect
from faultload.cluster.nodes import Node, cluster_limits, per_node, place, probe_nodes
from faultload.cluster.pool import RayWorkerPool


@dataclass
class RayCluster:
    """The cluster's nodes; ``pool`` places a trial's jobs on them (``run_trial``'s ``pools``)."""

    ray: ModuleType
    address: str
    nodes: list[Node]
    target_loopback: bool

    def pool(self, jobs: list[WorkerJob]) -> RayWorkerPool:
        return RayWorkerPool(self.ray, place(jobs, self.nodes, self.target_loopback))

    def limits(self, local: dict[str, int]) -> dict[str, int]:
        """The preflight's limits over this cluster's nodes (``nodes.cluster_limits``)."""
        return cluster_limits(self.nodes, local)

    def spread(self, workers: int) -> dict[str, int]:
        """How many of ``workers`` jobs each node gets (the preflight line shows it)."""
        return per_node([(None, self.nodes[i % len(self.nodes)]) for i in range(workers)])

    def close(self) -> None:
        """Leave the cluster (the actors a trial started are already gone)."""
        self.ray.shutdown()


def join(address: str, allow_remote: bool, target_loopback: bool, environ: Mapping[str, str]) -> RayCluster:
    """Connect to the cluster and probe its nodes; ClusterError (one line) for what cannot work.
    ``environ``: as :func:`faultload.cluster.connect.connect` takes it."""
    ray = connect(address, allow_remote, environ)
    try:
        nodes = probe_nodes(ray)
    except BaseException:
        ray.shutdown()
        raise
    return RayCluster(ray, address, nodes, target_loopback)
