"""Join a Ray cluster for a trial's load workers, refusing what would leave loopback.

Ray turns ``127.0.0.1``/``localhost`` into the machine's external address, so a
local cluster must run on other loopback addresses (127.0.0.2, 127.0.0.3):
the driver joins it from the address's own host. ``auto`` means the cluster
in ``RAY_ADDRESS``, as Ray's own ``auto`` does.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
from pathlib import Path
from types import ModuleType
from typing import Mapping
from urllib.parse import urlsplit

from faultload.model.target import is_loopback_host

INSTALL_HINT = "pip install 'faultload[ray]'"
NAMESPACE = "faultload"
REACH_TIMEOUT_S = 3.0


class ClusterError(ValueError):
    """The cluster cannot take the trial's workers (one line, the CLI exits 2)."""


def import_ray() -> ModuleType:
    """The ``ray`` module, or a ClusterError saying how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ClusterError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None


def resolve_address(address: str, environ: Mapping[str, str]) -> str:
    """``HOST:PORT`` of the cluster: ``address`` itself, or ``RAY_ADDRESS`` for ``auto``."""
    if address == "auto":
        address = environ.get("RAY_ADDRESS", "")
        if not address:
            raise ClusterError("--ray auto: RAY_ADDRESS is not set (give the cluster as HOST:PORT)")
    if "://" in address:
        raise ClusterError(
            f"--ray {address!r}: give the cluster's GCS address as HOST:PORT (ray:// clients "
            "are not supported: the actors' results come back through the driver)"
        )
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"--ray {address!r}: expected HOST:PORT, e.g. 127.0.0.3:26379")
    return address


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """One TCP connect to the cluster's GCS (``HOST:PORT``): Ray's own join waits a minute for one that is not there."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc})") from None


def address_host(address: str) -> str:
    return urlsplit(f"//{address}").hostname or ""


def _pythonpath(environ: Mapping[str, str]) -> str:
    here = str(Path(__file__).resolve().parents[2])
    rest = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    return os.pathsep.join([here, *rest])


def connect(address: str, allow_remote: bool, environ: Mapping[str, str]) -> ModuleType:
    """Join the cluster at ``address`` (after the checks above); return the initialised ``ray`` module.

    ``environ``: the driver's ``RAY_ADDRESS`` and ``PYTHONPATH``, as the CLI read them. The driver's node
    address is the cluster address's host when that is loopback, so Ray never picks the external
    interface for it.
    """
    address = resolve_address(address, environ)
    host = address_host(address)
    loopback = is_loopback_host(host)
    if not loopback and not allow_remote:
        raise ClusterError(
            f"--ray {address}: not a loopback address (pass --allow-remote to load from a cluster across a network)"
        )
    if host in ("127.0.0.1", "localhost"):
        raise ClusterError(
            f"--ray {address}: Ray rewrites 127.0.0.1/localhost to this machine's external "
            "address; start the cluster on another loopback address (e.g. 127.0.0.3)"
        )
    ray = import_ray()
    if ray.is_initialized():
        return ray
    # A loopback cluster is this machine: its actors import the faultload this driver runs (a checkout
    # on PYTHONPATH, as the suite's worktrees run), not whichever the raylet's Python has installed.
    kwargs = (
        {"_node_ip_address": host, "runtime_env": {"env_vars": {"PYTHONPATH": _pythonpath(environ)}}}
        if loopback
        else {}
    )
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.ERROR,
            configure_logging=False,
            **kwargs,
        )
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError ... for a cluster it cannot join
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ClusterError(f"--ray {address}: cannot join the cluster: {first}") from None
    return ray
