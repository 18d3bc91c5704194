"""Preflight sizing for the confirm run, on given limits (no processes started)."""

from __future__ import annotations

import pytest

from faultload.run.preflight import DoesNotFit, plan

MACHINE = {"nofile_soft": 20000, "nofile_hard": 20000, "somaxconn": 4096, "ephemeral_ports": 28232}


def test_full_run_is_capped_by_the_servers_fd_limit():
    fit = plan(131_072, 0, 0, MACHINE)
    assert fit.max_outstanding == (20000 - 256) // 2.5
    assert fit.workers >= 2 and fit.router_procs >= 1
    assert any("fd limit 20000" in note for note in fit.notes)


def test_small_requests_fit_without_notes():
    fit = plan(1000, 500, 2, MACHINE)
    assert (fit.max_outstanding, fit.workers, fit.notes) == (500, 2, [])


def test_low_fd_limit_resizes():
    fit = plan(131_072, 8192, 0, {**MACHINE, "nofile_soft": 1024, "nofile_hard": 1024})
    assert fit.max_outstanding == int((1024 - 256) / 2.5)
    assert fit.notes


def test_too_low_fd_limit_refuses():
    with pytest.raises(DoesNotFit, match="ulimit"):
        plan(131_072, 0, 0, {**MACHINE, "nofile_soft": 200, "nofile_hard": 200})


def test_workers_raised_when_one_cannot_hold_its_share():
    fit = plan(50_000, 15_000, 1, {**MACHINE, "nofile_soft": 60000, "nofile_hard": 4000})
    assert fit.workers > 1 and any("workers raised" in n for n in fit.notes)
