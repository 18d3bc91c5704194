"""Launch a TuFT Tinker API server for a trial, inside the target's own venv.

This file runs under the *target's* Python, not faultload's: it imports only the standard library and what
the TuFT release imports. Given a JSON launch spec (path in argv[1]), in this order:

1. two stand-ins go into ``sys.modules`` for the only modules on TuFT's server import path that load torch
   (``tuft.backends.fsdp_training_backend`` and ``tuft.loss_fn``: training code, never run by a sampling
   trial), so the venv needs no torch, vllm or ray;
2. the candidate fixes asked for that widen tinker's request or answer models do so (``tuft_fixes.py``),
   before ``tuft.server`` builds its routes from them;
3. ``tuft_patches.py`` (beside it) points sampling at faultload's router, timestamps the logs, scales the
   timers and applies the rest of the fixes;
4. the release's own ``tuft launch`` command serves (its Typer CLI, its config loading, its ``uvicorn.run``),
   so what is under test is the release's own start-up code; under cProfile when the spec names a
   ``profile_path`` (``launch_profile.py``).
"""

from __future__ import annotations

import json
import sys
import types
import typing

import launch_profile  # beside this file: the script's folder is sys.path[0]
import tinker.types
import tuft_fixes

# TuFT's loss-function names (tuft/loss_fn/__init__.py's LOSS_FN keys): tuft.compat reads only the keys.
LOSS_FN_NAMES = ("cispo", "cross_entropy", "dro", "importance_sampling", "ppo", "trinity_ppo")


def _unavailable(*_args: typing.Any, **_kwargs: typing.Any) -> typing.NoReturn:
    raise RuntimeError("training is not served by faultload's TuFT launch (no torch in the target venv)")


def _stand_in(name: str, **attributes: typing.Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def install_stand_ins() -> None:
    _stand_in("tuft.backends.fsdp_training_backend", FSDPTrainingBackend=_unavailable)
    _stand_in("tuft.loss_fn", LOSS_FN={name: None for name in LOSS_FN_NAMES}, get_loss_fn=_unavailable)


def widen_models(fixes: list[str]) -> None:
    for name in fixes:
        if name in tuft_fixes.BEFORE_IMPORT:
            tuft_fixes.BEFORE_IMPORT[name](tinker.types)


def serve(spec: dict, patches: types.ModuleType) -> None:
    applied = patches.apply(spec)
    print(f"faultload-launch: patches {json.dumps(applied)}", file=sys.stderr, flush=True)
    print(f"faultload-launch: version {patches.version()}", file=sys.stderr, flush=True)
    with launch_profile.profiled(spec.get("profile_path")):
        patches.serve(spec["argv"])


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        SPEC = json.load(fh)
    install_stand_ins()
    widen_models(SPEC.get("fixes", []))
    import tuft_patches  # imports tuft: after the stand-ins and the widened models

    serve(SPEC, tuft_patches)
