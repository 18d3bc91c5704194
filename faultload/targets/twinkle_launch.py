"""Launch a twinkle-kit Tinker API server for a trial, inside the target's own venv.

This file runs under the *target's* Python, not faultload's: it imports only the standard library and what
the twinkle-kit release imports. Given a JSON launch spec (path in argv[1]), ``twinkle_patches.py`` (beside
it) checks its patch points; then this process starts a Ray node on 127.0.0.2, whose workers each run
``twinkle_patches.worker_setup`` (the mock sampler's samples to faultload's router, the state's timers
scaled), and twinkle's own ``ServerLauncher`` deploys its Tinker gateway and mock sampler on Ray Serve and
serves until SIGTERM. The server is this process's whole session: Ray's processes and workers.
"""

from __future__ import annotations

import json
import os
import sys

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        SPEC = json.load(fh)
    import twinkle_patches  # imports launch_logs (uvicorn), beside it

    os.environ[twinkle_patches.SPEC_ENV] = os.path.abspath(sys.argv[1])

    applied = twinkle_patches.check_patch_points() + [f"poll hold, expiry, cleanup x{SPEC['time_scale']:g}"]
    applied += [f"fix {name}" for name in SPEC.get("fixes", [])]
    print(f"faultload-launch: patches {json.dumps(applied)}", file=sys.stderr, flush=True)
    print(f"faultload-launch: version {twinkle_patches.version()}", file=sys.stderr, flush=True)
    twinkle_patches.serve(SPEC)
