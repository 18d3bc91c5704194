"""``faultload matrix --ray``: the rows spread over a Ray cluster's nodes, one row per node at a time.

A row is what it is sequentially (``matrix.run_row``: its own pytest session,
its own stack), run by a Ray task pinned to a node; the next row goes to the
first node that is free. Results come back in the rows' order, so the table
is laid out as the sequential run's. Ctrl-C cancels the running tasks
gently (``ray.cancel`` raises KeyboardInterrupt in them, and ``run_row``
then stops its session as it does locally), waits for them, then kills what
is left.
"""

from __future__ import annotations

from typing import Any, Callable

from faultload.cluster.nodes import Node, pinned
from faultload.cluster.session import RayCluster

WAIT_S = 30.0  # one ray.wait; the loop itself ends when every row has a result
CANCEL_WAIT_S = 120.0  # a cancelled row's session stopping its stack (run_row's _stop takes up to 90 s)


def _run_on_node(run_one: Callable[[Any], Any], row: Any) -> Any:
    return run_one(row)


def spread_rows(
    cluster: RayCluster, rows: list[Any], run_one: Callable[[Any], Any], log: Callable[[str], None]
) -> list[Any]:
    """``run_one(row)`` for every row, on the cluster's nodes, at most one per node at a time."""
    ray = cluster.ray
    task = ray.remote(_run_on_node)
    free: list[Node] = list(cluster.nodes)
    queue = list(enumerate(rows))
    pending: dict[Any, tuple[int, Node]] = {}
    results: dict[int, Any] = {}
    try:
        while queue or pending:
            while free and queue:
                index, row = queue.pop(0)
                node = free.pop(0)
                log(f"row {row.name}: on node {node.address}")
                ref = task.options(**pinned(ray, node.node_id), max_retries=0).remote(run_one, row)
                pending[ref] = (index, node)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                index, node = pending.pop(ref)
                results[index] = ray.get(ref)
                log(f"row {rows[index].name}: {results[index].shown} (on node {node.address})")
                free.append(node)
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        ray.wait(list(pending), num_returns=len(pending), timeout=CANCEL_WAIT_S)
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    return [results[i] for i in range(len(rows))]
