"""A second interrupt whose cleanup overruns its deadline still removes the scratch folders the process made.

The child below is a stand-in for a run (no stack): it makes a scratch folder,
and its cleanup after the first Ctrl-C hangs, so only the hard exit can end it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import default_signals

from faultload.host import scratch

CHILD = textwrap.dedent(
    """
    import sys, threading
    from faultload.host import scratch
    from faultload.host.processes import Interrupts

    Interrupts(130, hard_exit_s=0.2, name="child").install()
    made = scratch.make("hard-exit-", sys.argv[1])
    kept = scratch.make("kept-", sys.argv[1])
    scratch.keep(kept)
    try:
        print(made, flush=True)  # inside the try: the first Ctrl-C may come at once
        threading.Event().wait(60)
    except KeyboardInterrupt:
        print("cleaning", flush=True)
        threading.Event().wait(60)  # a cleanup that never finishes
    """
)


def test_the_hard_exit_removes_the_scratch_folders_and_keeps_what_was_kept(tmp_path: Path):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    try:
        made = Path(proc.stdout.readline().strip())
        assert made.parent == tmp_path and made.is_dir(), proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == "cleaning", proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 130, proc.stderr.read()
    assert "cleanup still running" in proc.stderr.read()
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == ["kept"]


def test_a_removed_folder_is_forgotten_and_remove_all_spares_it(tmp_path: Path):
    made = scratch.make("gone-", tmp_path)
    scratch.remove(made)
    assert not made.exists()
    again = tmp_path / made.name
    again.mkdir()  # someone else's folder by the same name later
    scratch.remove_all()
    assert again.is_dir()
