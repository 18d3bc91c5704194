"""The machine's turns (faultload.host.admission): up to N trials beside each other, one alone, across processes.

Each holder is its own ``Admission`` (its own open files, as each lane's process has), in a thread of this test
or, for a killed holder, a child process; every wait is on an event, bounded.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from faultload.host.admission import Admission, AdmissionTimeout

WAIT_S = 10.0


def hold_beside(folder: Path, slots: int, label: str, entered: threading.Event, leave: threading.Event, seen: list):
    with Admission(folder, slots).beside(label) as others:
        seen.append(sorted(others))
        entered.set()
        assert leave.wait(WAIT_S)


def start(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def test_up_to_n_beside_each_other_then_the_next_waits_for_a_slot(tmp_path: Path) -> None:
    entered = [threading.Event() for _ in range(3)]
    leave = [threading.Event() for _ in range(3)]
    seen: list = []
    first = start(hold_beside, tmp_path, 2, "a", entered[0], leave[0], seen)
    assert entered[0].wait(WAIT_S)
    start(hold_beside, tmp_path, 2, "b", entered[1], leave[1], seen)
    assert entered[1].wait(WAIT_S)
    third = start(hold_beside, tmp_path, 2, "c", entered[2], leave[2], seen)
    assert not entered[2].wait(0.5)  # both slots held: c waits
    leave[0].set()
    first.join(WAIT_S)
    assert entered[2].wait(WAIT_S)  # a left: c takes its slot
    assert seen == [[], ["a"], ["b"]]  # each said what ran beside it as it started
    leave[1].set()
    leave[2].set()
    third.join(WAIT_S)


def test_alone_waits_for_the_running_and_holds_new_trials_back_until_it_ends(tmp_path: Path) -> None:
    entered, leave = threading.Event(), threading.Event()
    start(hold_beside, tmp_path, 3, "small", entered, leave, [])
    assert entered.wait(WAIT_S)
    alone_in, alone_out = threading.Event(), threading.Event()

    def run_alone() -> None:
        with Admission(tmp_path, 3).alone("size burst"):
            alone_in.set()
            assert alone_out.wait(WAIT_S)

    start(run_alone)
    assert not alone_in.wait(0.5)  # the small trial still runs
    late_in, late_out = threading.Event(), threading.Event()
    late_seen: list = []
    start(hold_beside, tmp_path, 3, "late", late_in, late_out, late_seen)
    assert not late_in.wait(0.5)  # the alone trial waits at the turnstile: nothing new starts beside
    leave.set()
    assert alone_in.wait(WAIT_S)
    assert not late_in.is_set()
    assert Admission(tmp_path, 3).running() == ["size burst (alone)"] * 3
    alone_out.set()
    assert late_in.wait(WAIT_S)
    assert late_seen == [[]]
    late_out.set()


def test_a_wait_past_its_bound_says_who_held_the_machine(tmp_path: Path) -> None:
    entered, leave = threading.Event(), threading.Event()
    start(hold_beside, tmp_path, 1, "test_health trial 3", entered, leave, [])
    assert entered.wait(WAIT_S)
    with pytest.raises(AdmissionTimeout, match="held by test_health trial 3"):
        with Admission(tmp_path, 1, timeout_s=0.2).beside("x"):
            pass
    leave.set()


def test_a_killed_holder_leaves_its_slot_free(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib\n"
            "from faultload.host.admission import Admission\n"
            "with Admission(pathlib.Path(sys.argv[1]), 1).alone('killed'):\n"
            "    print('held', flush=True); sys.stdin.read()\n",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AdmissionTimeout):
            with Admission(tmp_path, 1, timeout_s=0.2).beside("x"):
                pass
    finally:
        holder.kill()
        holder.wait(WAIT_S)
    with Admission(tmp_path, 1, timeout_s=WAIT_S).beside("after") as others:
        assert others == []


def test_a_trial_inside_a_trial_is_refused(tmp_path: Path) -> None:
    admission = Admission(tmp_path, 2)
    with admission.beside("outer"):
        with pytest.raises(RuntimeError, match="already holds a slot"):
            with admission.alone("inner"):
                pass


def test_no_slots_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        Admission(tmp_path, 0)


def test_a_share_holds_several_slots_and_leaves_the_rest_beside_it(tmp_path: Path) -> None:
    held, leave = threading.Event(), threading.Event()

    def burst() -> None:
        with Admission(tmp_path, 4).share("gw1 burst", 3) as others:
            assert others == []
            held.set()
            assert leave.wait(WAIT_S)

    start(burst)
    assert held.wait(WAIT_S)
    assert Admission(tmp_path, 4).running() == ["gw1 burst (3 slots)"] * 3
    with Admission(tmp_path, 4, timeout_s=WAIT_S).beside("small") as others:  # the fourth slot
        assert others == ["gw1 burst (3 slots)"] * 3
    with pytest.raises(AdmissionTimeout, match="for 3 slots"):  # a second burst: not while the first runs
        with Admission(tmp_path, 4, timeout_s=0.2).share("gw2 burst", 3):
            pass
    leave.set()
    with Admission(tmp_path, 4, timeout_s=WAIT_S).share("gw2 burst", 3) as others:
        assert others == []
    with Admission(tmp_path, 2, timeout_s=WAIT_S).share("all of them", 2):  # a share of every slot is alone
        assert Admission(tmp_path, 2).running() == ["all of them (alone)"] * 4  # every slot file: 4 were made
