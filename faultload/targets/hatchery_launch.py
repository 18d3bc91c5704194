"""Launch a hatchery-core Tinker API server for a trial, inside the target's own venv.

This file runs under the *target's* Python, not faultload's: it imports only the standard library and what
the hatchery-core release imports. Given a JSON launch spec (path in argv[1]), ``hatchery_patches.py`` (beside
it) points the scripted worker's sampling at faultload's router, binds loopback, timestamps the logs and scales
the timers; then the release's own local server (``hatchery.core.local_dev``: its gateway, in-memory queue and
registry, the worker it runs without a GPU) serves, under cProfile when the spec names a ``profile_path``.
"""

from __future__ import annotations

import json
import sys

import launch_profile  # beside this file: the script's folder is sys.path[0]

if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        SPEC = json.load(fh)
    import hatchery_patches  # imports hatchery

    applied = hatchery_patches.apply(SPEC)
    print(f"faultload-launch: patches {json.dumps(applied)}", file=sys.stderr, flush=True)
    print(f"faultload-launch: version {hatchery_patches.version()}", file=sys.stderr, flush=True)
    with launch_profile.profiled(SPEC.get("profile_path")):
        hatchery_patches.serve()
