"""The fake router's CPU per completion, two checkouts side by side.

A benchmark, not a test. Starts ``python -m faultload.router`` (or, with
``--compiled``, the checkout's compiled router) from checkout
A and from checkout B (each with its own ``PYTHONPATH``), alternating A B B A
..., and drives each with the same load from this process: ``--requests``
``POST /v1/completions`` bodies shaped as SkyRL's forwarding client sends them
(model, prompt with the request's nonce, n, seed, max_tokens, temperature,
top_p, top_k, logprobs, stream, return_token_ids), ``--concurrency`` at once,
over keep-alive connections (``faultload.client.http.HttpPool``, which also
checks nothing: this measures the router, not the client), or with
``--fresh-connections F`` a share F of them each on a connection of its own, as
SkyRL 0.4.0's forwarding pool opens them. The router's CPU is
read from ``/proc`` (psutil) around the load, after a warm-up that opens the
connections and builds the body tables. The router runs pinned to one CPU and this
driver to another (with two or more). Every answer must be a 200 of the
right length, or the run stops.

Prints per repetition and as medians (with spread) the router's microseconds
of CPU per completion, and B/A of the medians.

Usage: .faultload/venv/bin/python bench/router_cpu.py --a PATH --b PATH [--repeat 3]
       [--compiled none|a|b|both] [--requests 16384] [--concurrency 2000] [-- ROUTER_ARGS]   (default: --mode latency
       --max-num-seqs 256 --gen-seconds 0.05, the confirmation's engine at a 20th of its 1 s)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _figures import abba, checkouts_parser, print_ab_medians  # noqa: E402  (bench/, beside this script)

from faultload.client.http import HttpPool  # noqa: E402
from faultload.model import tokens  # noqa: E402
from faultload.router.compiled import find_router  # noqa: E402

DEFAULT_ROUTER_ARGS = ["--mode", "latency", "--max-num-seqs", "256", "--gen-seconds", "0.05"]
_JSON = b"Content-Type: application/json\r\n"


def forward_body(nonce: int, max_tokens: int) -> bytes:
    """What SkyRL 0.4.0's forwarding client posts for one sample (skyrl_train_inference_forwarding.py)."""
    return json.dumps(
        {
            "model": "faultload-model",
            "prompt": tokens.prompt_tokens(nonce),
            "n": 1,
            "seed": nonce % (1 << 31),
            "max_tokens": max_tokens,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "logprobs": 1,
            "stream": False,
            "return_token_ids": True,
        }
    ).encode()


def router_program(checkout: Path, compiled: bool) -> list[str]:
    """The checkout's compiled router (built by setup into this workspace's tools) or its Python one."""
    if not compiled:
        return [sys.executable, "-m", "faultload.router"]
    found = find_router(ROOT / ".faultload" / "tools", checkout / "faultload" / "router" / "go")
    if found is None:
        raise SystemExit(
            f"router_cpu: {checkout}'s compiled router is not built in {ROOT / '.faultload' / 'tools'} "
            f"(run `faultload setup` in that checkout with FAULTLOAD_HOME={ROOT / '.faultload'})"
        )
    return [str(found)]


def start_router(checkout: Path, router_args: list[str], compiled: bool) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.Popen(
        [*router_program(checkout, compiled), "--port", "0", *router_args],
        cwd=checkout,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"router_cpu: {checkout}: the router did not start (said {line!r})")
    return proc, int(line.split()[1])


async def drive(port: int, first: int, count: int, concurrency: int, max_tokens: int, fresh: float) -> None:
    """``count`` completions, ``concurrency`` at once; a share ``fresh`` of them each on a new connection that
    the router closes after its answer (``Connection: close``), the rest over kept-alive ones."""
    gate = asyncio.Semaphore(concurrency)
    async with (
        HttpPool("127.0.0.1", port, None, 10.0) as kept,
        HttpPool("127.0.0.1", port, None, 10.0, keepalive=False) as closing,
    ):

        async def one(i: int) -> None:
            pool = closing if int((i + 1) * fresh) > int(i * fresh) else kept  # the fresh share, spread evenly
            async with gate:
                status, _, body = await pool.post("/v1/completions", forward_body(first + i, max_tokens), _JSON, 120.0)
            if status != 200 or b'"finish_reason"' not in body:
                raise SystemExit(f"router_cpu: completion {first + i}: HTTP {status}: {body[:200]!r}")

        await asyncio.gather(*(one(i) for i in range(count)))


def pin(router: psutil.Process) -> None:
    """The router on the last CPU, this driver on the first: unpinned they trade cores and caches. The same
    checkout against itself, 3 ABBA: unpinned B/A 0.78 (spreads 30% / 41%); pinned 1.03 and 0.90 (23% / 5%,
    25% / 2%)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        router.cpu_affinity([cpus[-1]])
        os.sched_setaffinity(0, {cpus[0]})


def one_run(
    checkout: Path,
    compiled: bool,
    router_args: list[str],
    requests: int,
    concurrency: int,
    max_tokens: int,
    fresh: float,
) -> float:
    """The router's microseconds of CPU per completion (after a warm-up of ``concurrency`` completions)."""
    proc, port = start_router(checkout, router_args, compiled)
    try:
        router = psutil.Process(proc.pid)
        pin(router)
        asyncio.run(drive(port, 1, concurrency, concurrency, max_tokens, 0.0))
        before = router.cpu_times()
        asyncio.run(drive(port, 1 + concurrency, requests, concurrency, max_tokens, fresh))
        after = router.cpu_times()
        return 1e6 * ((after.user - before.user) + (after.system - before.system)) / requests
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> int:
    parser = checkouts_parser(__doc__.splitlines()[0], repeat=3)
    parser.add_argument("--requests", type=int, default=16384)
    parser.add_argument("--concurrency", type=int, default=2000)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--fresh-connections",
        type=float,
        default=0.0,
        metavar="F",
        help="share of completions sent each on a new connection (0.4.0's forwarding pool, "
        "keepalive_timeout=2 s, opened one for ~70%% of forwards in latency mode)",
    )
    parser.add_argument(
        "--compiled",
        choices=("none", "a", "b", "both"),
        default="none",
        help="which side runs its checkout's compiled router (faultload/router/go) instead of "
        "python -m faultload.router",
    )
    parser.add_argument("router_args", nargs="*")
    args = parser.parse_args()
    for path in (args.a, args.b):
        if not (path / "faultload" / "router" / "__init__.py").is_file():
            print(f"router_cpu: {path} is not a faultload checkout", file=sys.stderr)
            return 2
    if not 0.0 <= args.fresh_connections <= 1.0:
        print("router_cpu: --fresh-connections must be in [0, 1]", file=sys.stderr)
        return 2
    if min(args.repeat, args.requests, args.concurrency, args.max_tokens) < 1:
        print("router_cpu: --repeat, --requests, --concurrency and --max-tokens must be >= 1", file=sys.stderr)
        return 2
    router_args = args.router_args or DEFAULT_ROUTER_ARGS
    compiled = {"A": args.compiled in ("a", "both"), "B": args.compiled in ("b", "both")}
    runs = abba(
        args.repeat,
        lambda side: one_run(
            (args.a if side == "A" else args.b).resolve(),
            compiled[side],
            router_args,
            args.requests,
            args.concurrency,
            args.max_tokens,
            args.fresh_connections,
        ),
    )
    kind = {True: "compiled router", False: "Python router"}
    print(
        f"A = {args.a} ({kind[compiled['A']]})\nB = {args.b} ({kind[compiled['B']]})\nrouter args: {' '.join(router_args)}; {args.requests} completions at "
        f"{args.concurrency} in flight, {args.fresh_connections:.0%} on fresh connections, {args.repeat} each, ABBA"
    )
    print_ab_medians(runs, "us CPU per completion")
    return 0


if __name__ == "__main__":
    sys.exit(main())
