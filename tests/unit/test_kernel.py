"""faultload.run.kernel against the real kernel: fd counts and listener accept queues."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from faultload.host.network import pick_free_port
from faultload.run import kernel


def test_open_fds_counts_what_the_fd_directory_lists():
    extra = [socket.socket() for _ in range(50)]
    try:
        listed = len(os.listdir(f"/proc/{os.getpid()}/fd")) - 1  # listing opens one fd of its own
        assert kernel.open_fds(os.getpid()) == listed
        assert kernel.open_fds(os.getpid()) >= 50
    finally:
        for sock in extra:
            sock.close()


def test_open_fds_of_a_gone_process_is_none():
    child = subprocess.Popen(["true"])
    child.wait(timeout=10)
    assert kernel.open_fds(child.pid) is None


def test_listen_state_reads_the_accept_queue_and_backlog():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(37)
        port = listener.getsockname()[1]
        assert kernel.listen_state(port) == kernel.ListenState(queued=0, backlog=37)
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]  # never accepted
        try:
            assert kernel.listen_state(port) == kernel.ListenState(queued=3, backlog=37)
        finally:
            for sock in clients:
                sock.close()


def test_listen_state_finds_an_ipv6_listener():
    with socket.socket(socket.AF_INET6) as listener:
        try:
            listener.bind(("::1", 0))
        except OSError as exc:
            pytest.skip(f"no IPv6 loopback here: {exc}")
        listener.listen(11)
        assert kernel.listen_state(listener.getsockname()[1]) == kernel.ListenState(queued=0, backlog=11)


def test_listen_state_of_a_port_nobody_listens_on_is_none():
    assert kernel.listen_state(pick_free_port()) is None
