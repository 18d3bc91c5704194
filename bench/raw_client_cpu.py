"""The raw client's own CPU per request, without the network: two checkouts side by side.

A benchmark, not a test. Runs ``RawClient`` (faultload.client.raw) over
``--requests`` requests against a stand-in pool whose ``post`` answers at once
from precomputed bodies (an asample's ``request_id``; a poll's SampleResponse
proto of the request's own result of at most 64 tokens, as the checkout's
``tests/results.py`` builds it), so what is measured is the
client's own work per request: its bookkeeping (history, attempts, live
counters), the asample body, the request id's parse, the result's decode and
its check against the nonce — everything but HTTP and the kernel
(``bench/client_cpu.py`` measures the HTTP pool). Every request must end OK.
Each run is a fresh interpreter with the checkout's ``PYTHONPATH``, in ABBA
order; CPU is the run's getrusage around the load (the bodies are built
before).

Usage: .faultload/venv/bin/python bench/raw_client_cpu.py --a PATH --b PATH [--repeat 5] [--requests 20000]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _figures import abba, checkouts_parser, print_ab_medians  # bench/, beside this script

ONE_RUN = r"""
import asyncio, json, multiprocessing as mp, resource, sys, time
import uvloop
from faultload.client import decode
from faultload.client.counters import LiveCounters
from faultload.client.job import COUNTER_SLOTS, WorkerJob
from faultload.client.raw import RawClient
from faultload.model.shape import LoadShape
from faultload.record.history import Outcome

count = int(sys.argv[1])
shape = LoadShape(requests=count, result_tokens=64, max_outstanding=2000, workers=1, accept="proto")
job = WorkerJob(worker=0, base_url="http://127.0.0.1:1", source_ip=None, sampling_session_id="bench",
                base_model="m", first=0, count=count, nonce_salt=5, shape=shape, t0=time.monotonic(), deadline_s=600)

from tests.results import proto_result  # each checkout's own: the result its check expects

bodies = {str(i).encode(): proto_result(job.nonce(i), 1, 64) for i in range(count)}

class Pool:
    peak_live = 0
    async def post(self, path, body, headers, timeout_s):
        await asyncio.sleep(0)
        if path.endswith("asample"):
            seq = body.split(b'"seq_id":', 1)[1].split(b",", 1)[0]
            return 200, "application/json", b'{"request_id":"' + seq + b'"}'
        return 200, decode.PROTO_CONTENT_TYPE, bodies[str(json.loads(body)["request_id"]).encode()]

client = RawClient(job, Pool(), LiveCounters(mp.RawArray("q", len(COUNTER_SLOTS)), 0, len(COUNTER_SLOTS)))
usage = resource.getrusage(resource.RUSAGE_SELF)
before = usage.ru_utime + usage.ru_stime
uvloop.run(client.run())
usage = resource.getrusage(resource.RUSAGE_SELF)
ok = int((client.history["outcome"] == Outcome.OK).sum())
if ok != count:
    sys.exit(f"raw_client_cpu: {ok} of {count} requests OK")
print(1e6 * (usage.ru_utime + usage.ru_stime - before) / count)
"""


def one_run(checkout: Path, requests: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(requests)], cwd=checkout, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"raw_client_cpu: {checkout}: {proc.stderr.strip()[-500:]}")
    return float(proc.stdout)


def main() -> int:
    parser = checkouts_parser(__doc__.splitlines()[0], repeat=5)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    for path in (args.a, args.b):
        if not (path / "faultload" / "client" / "raw.py").is_file():
            print(f"raw_client_cpu: {path} is not a faultload checkout", file=sys.stderr)
            return 2
    if args.repeat < 1 or args.requests < 1:
        print("raw_client_cpu: --repeat and --requests must be >= 1", file=sys.stderr)
        return 2
    runs = abba(args.repeat, lambda side: one_run((args.a if side == "A" else args.b).resolve(), args.requests))
    print(f"A = {args.a}\nB = {args.b}\n{args.requests} requests per run, {args.repeat} runs each, ABBA")
    print_ab_medians(runs, "us CPU per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
