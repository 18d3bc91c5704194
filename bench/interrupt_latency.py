"""How long `faultload run` takes to end after a signal, per signal: signal -> exit seconds.

Starts ``faultload run`` (default: the 20,000-request, 2-worker latency-router
trial, ~80 s uninterrupted) in a session of its own, waits until
the load is running (its first progress line, then ``--after`` seconds more so
the outstanding cap is full), sends the signal as its usual sender would —
SIGINT and SIGHUP to the whole process group (a terminal's Ctrl-C and hang-up),
SIGTERM to the faultload process only (``kill``, ``timeout``) — and times the
exit. ``double`` is Ctrl-C twice, the second 0.5 s after the first.

Per run it prints the seconds, the exit code, whether the JSON report says
interrupted, and what was left behind (processes carrying the run's tag,
``faultload-router-*`` dirs in its private TMPDIR, stack dirs in its private
workdir's runs/); then the median per signal. The run starts with the three
signals at their default disposition, whatever this script inherited (a
background job of a script ignores SIGINT, ``nohup`` SIGHUP, and faultload
keeps an ignored signal ignored). The machine is shared and noisy: read the
medians.

Usage: .faultload/venv/bin/python bench/interrupt_latency.py [--signals INT,TERM,HUP,double] [--repeats N]
       [--after S] [-- faultload run args...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
WORKDIR = ROOT / ".faultload"
TAG_VAR = "FAULTLOAD_TEST_TAG"  # the tests' tag: every process the run starts inherits it
DEFAULT_ARGS = ["--requests", "20000", "--workers", "2", "--router-mode", "latency"]
READY_TIMEOUT_S = 300.0
EXIT_TIMEOUT_S = 120.0


def tagged(tag: str) -> list[str]:
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(TAG_VAR) == tag:
                out.append(f"{proc.pid} {' '.join(proc.cmdline())[:80]}")
        except (psutil.Error, OSError):
            continue
    return out


def private_workdir(tmp: Path) -> Path:
    """A faultload folder of the run's own (so its runs/ is its own), with the real targets and tools."""
    root = tmp / "fl"
    root.mkdir()
    for name in ("targets", "tools"):
        if (WORKDIR / name).exists():
            (root / name).symlink_to(WORKDIR / name, target_is_directory=True)
    return root


def default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def one_run(how: str, run_args: list[str], after_s: float) -> dict:
    tag = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="interrupt-bench-") as tmp_text:
        tmp = Path(tmp_text)
        workdir = private_workdir(tmp)
        env = {**os.environ, TAG_VAR: tag, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
        json_out = tmp / "report.json"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "faultload.cli.main",
                "run",
                "--workdir",
                str(workdir),
                *run_args,
                "--json-out",
                str(json_out),
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=default_signals,
        )
        started = threading.Event()

        def read_stderr() -> None:
            for line in proc.stderr:  # progress lines: "[   2.0s] completed N/..."
                if line.startswith("[") and "completed" in line:
                    started.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        try:
            if not started.wait(READY_TIMEOUT_S):
                raise RuntimeError(f"no progress line in {READY_TIMEOUT_S:.0f}s")
            time.sleep(after_s)
            if proc.poll() is not None:
                raise RuntimeError(f"the run ended (exit {proc.returncode}) before the signal: lengthen it")
            sent = time.monotonic()
            if how == "TERM":
                proc.send_signal(signal.SIGTERM)
            elif how == "double":
                os.killpg(proc.pid, signal.SIGINT)
                time.sleep(0.5)
                os.killpg(proc.pid, signal.SIGINT)
            else:
                os.killpg(proc.pid, getattr(signal, f"SIG{how}"))
            code = proc.wait(EXIT_TIMEOUT_S)
            seconds = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        time.sleep(1.0)  # children reparented at exit get a moment to finish dying
        report = json.loads(json_out.read_text()) if json_out.exists() else None
        return {
            "signal": how,
            "seconds": seconds,
            "exit": code,
            "interrupted": report.get("interrupted") if report else None,
            "left_processes": tagged(tag),
            "left_dirs": [p.name for p in tmp.iterdir() if p.name.startswith("faultload-router-")]
            + [f"runs/{p.name}" for p in (workdir / "runs").glob("*")],
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signals", default="INT,TERM,HUP,double")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--after", type=float, default=10.0, help="seconds of load before the signal")
    parser.add_argument("run_args", nargs="*", help="faultload run args (default: %(default)s)", default=DEFAULT_ARGS)
    args = parser.parse_args()
    signals = [s.strip() for s in args.signals.split(",") if s.strip()]
    results: dict[str, list[float]] = {s: [] for s in signals}
    for repeat in range(args.repeats):
        for how in signals:
            r = one_run(how, args.run_args, args.after)
            results[how].append(r["seconds"])
            print(
                f"repeat {repeat + 1} {how:6s} {r['seconds']:6.2f}s exit {r['exit']} interrupted={r['interrupted']} "
                f"left processes {r['left_processes']} dirs {r['left_dirs']}",
                flush=True,
            )
    for how in signals:
        print(f"median {how:6s} {statistics.median(results[how]):6.2f}s  over {results[how]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
