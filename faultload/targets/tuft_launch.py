"""Launch a TuFT Tinker API server for a trial, inside the target's own venv.

This file runs under the *target's* Python, not faultload's: it imports only the standard library and what
the TuFT release imports. Given a JSON launch spec (path in argv[1]) it puts two stand-ins in ``sys.modules``
for the only modules on TuFT's server import path that load torch (``tuft.backends.fsdp_training_backend``
and ``tuft.loss_fn``: training code, never run by a sampling trial), so the venv needs no torch, vllm or ray;
then ``tuft_patches.py`` (beside it) points sampling at faultload's router, timestamps the logs and scales the
timers, and the release's own ``tuft launch`` command serves (its Typer CLI, its config loading, its
``uvicorn.run``), so what is under test is the release's own start-up code.
"""

from __future__ import annotations

import json
import sys
import types
import typing

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


install_stand_ins()  # before tuft_patches imports tuft
import tuft_patches  # noqa: E402  (beside this file: the script's folder is sys.path[0])


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    applied = tuft_patches.apply(spec)
    print(f"faultload-launch: patches {json.dumps(applied)}", file=sys.stderr, flush=True)
    print(f"faultload-launch: version {tuft_patches.version()}", file=sys.stderr, flush=True)
    tuft_patches.serve(spec["argv"])


if __name__ == "__main__":
    main()
