"""SkyRL's own Tinker engine loop with a null model backend: training traffic without a GPU.

Runs under the *target's* Python (like ``skyrl_launch.py``, beside it), as the
engine subprocess the API server starts: ``skyrl_launch.py`` replaces the
release's ``_build_uv_run_cmd_engine`` with ``[python, this file,
*config_to_argv(engine_config)]``, so the engine gets exactly the argv the
release would give it. Everything above the backend is SkyRL's:
``skyrl.tinker.engine.main()`` parses that argv, builds ``TinkerEngine``,
polls the database for pending futures, batches forward/forward_backward per
model, runs the single requests (create_model, optim_step, checkpoints,
unload), expires sessions, and writes every result row. Only
``skyrl.tinker.engine.get_backend_classes`` is replaced (0.3.0 and 0.4.0 look
it up as a module global when the engine is built), returning
:class:`NullBackend`, which needs no torch, ray or GPU.

The null backend's outputs are derived from the request, as the fake router
derives sample bodies from the prompt, so a client can tell a corrupted or
misrouted result: for datum target tokens ``t_0..t_{n-1}``, ``logprobs[i] =
-((t_i * 7 + i * 13) % 10000) / 10000`` and ``elementwise_loss[i] =
-logprobs[i] * weights[i]``; metrics ``loss:sum`` (their sum) and
``num_tokens:sum``. ``optim_step`` answers the learning rate it was given.
Compute time: ``FAULTLOAD_NULL_BACKEND`` (JSON, set by the launcher) may hold
``seconds_per_token`` — the engine sleeps that long per target token of a
batch, blocking its loop as a GPU step would.

Sampling never reaches this backend in faultload's configuration (megatron,
not colocated: the API forwards samples to the router); a sample batch is
answered with an error naming that.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
import threading
import time
import typing

import typing_extensions

# Before anything loads pydantic (as skyrl_launch.py does for the API process; this is a new one).
typing.TypedDict = typing_extensions.TypedDict  # type: ignore[misc]

import skyrl.tinker.engine as engine  # noqa: E402  (the release's engine loop)
from pydantic import BaseModel  # noqa: E402  (after the alias)
from skyrl.backends.backend import AbstractBackend  # noqa: E402
from skyrl.tinker import types  # noqa: E402

LOGPROB_SCALE = 10_000
SETTINGS_ENV = "FAULTLOAD_NULL_BACKEND"
PARENT_ENV = "FAULTLOAD_ENGINE_PARENT"


def null_logprobs(targets: list[int]) -> list[float]:
    """The logprob the null backend reports for each target token (a function of the request only)."""
    return [-((int(t) * 7 + i * 13) % LOGPROB_SCALE) / LOGPROB_SCALE for i, t in enumerate(targets)]


class NullBackendConfig(BaseModel, extra="allow"):
    """The engine builds it from ``--backend-config`` (dotted keys) and, on 0.4.0, ``runtime_role``."""

    runtime_role: str = "combined"


class NullBackend(AbstractBackend):
    """SkyRL's backend interface with no model: outputs derived from the request, optional sleep per token."""

    def __init__(self, base_model: str, config: BaseModel) -> None:
        self.base_model = base_model
        self.config = config
        self._models: dict[str, typing.Any] = {}
        settings = json.loads(os.environ.get(SETTINGS_ENV) or "{}")
        self._seconds_per_token = float(settings.get("seconds_per_token", 0.0))

    def create_model(self, model_id: str, lora_config, model_role: str = "policy") -> None:
        self._models[model_id] = lora_config

    def has_model(self, model_id: str) -> bool:
        return model_id in self._models

    def delete_model(self, model_id: str) -> None:
        self._models.pop(model_id, None)

    def _model_pass(self, prepared) -> dict:
        results = {}
        tokens = 0
        for request_id, _model_id, start, end in (s[:4] for s in prepared.request_batch_slices):
            outputs, loss, count = [], 0.0, 0
            for i in range(start, end):
                targets = prepared.all_targets[i]
                weights = prepared.all_token_weights[i] or [1.0] * len(targets)
                logprobs = null_logprobs(targets)
                losses = [-lp * w for lp, w in zip(logprobs, weights)]
                n = len(targets)
                outputs.append(
                    {
                        "logprobs": {"data": logprobs, "dtype": "float32", "shape": [n]},
                        "elementwise_loss": {"data": losses, "dtype": "float32", "shape": [n]},
                    }
                )
                loss += sum(losses)
                count += n
            tokens += count
            results[request_id] = types.ForwardBackwardOutput(
                loss_fn_output_type="scalar",
                loss_fn_outputs=outputs,
                metrics={"loss:sum": float(loss), "num_tokens:sum": float(count)},
            )
        if self._seconds_per_token > 0:
            time.sleep(self._seconds_per_token * tokens)
        return results

    def forward_backward(self, prepared_batch) -> dict:
        return self._model_pass(prepared_batch)

    def forward(self, prepared_batch) -> dict:
        return self._model_pass(prepared_batch)

    def optim_step(self, model_id: str, request_data):
        return types.OptimStepOutput(metrics={"skyrl.ai/learning_rate": float(request_data.adam_params.learning_rate)})

    def sample(self, prepared_batch) -> dict:
        message = "faultload's null backend does not sample: samples go to the router"
        return {s[0]: types.ErrorResponse(error=message, status="failed") for s in prepared_batch.request_batch_slices}

    def _marker(self, output_path, model_id: str) -> None:
        """A checkpoint is a tar holding one MARKER member (what the real backend writes when weights stay on GPU)."""
        os.makedirs(os.path.dirname(str(output_path)), exist_ok=True)
        marker = f"faultload null backend: no weights for {model_id}\n".encode()
        with tarfile.open(str(output_path), "w") as tar:
            info = tarfile.TarInfo("MARKER")
            info.size = len(marker)
            tar.addfile(info, io.BytesIO(marker))

    def save_checkpoint(self, output_path, model_id: str) -> None:
        self._marker(output_path, model_id)

    def save_sampler_checkpoint(self, output_path, model_id: str, persist: bool = True) -> None:
        self._marker(output_path, model_id)

    def load_checkpoint(self, checkpoint_path, model_id: str, load_optimizer: bool = True) -> None:
        if not os.path.exists(str(checkpoint_path)):
            raise FileNotFoundError(f"no checkpoint at {checkpoint_path}")


def _die_with_parent() -> None:
    """The API server starts this process; it must not outlive it (a SIGKILL of the API alone)."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())  # the API's pid, set before it spawned us

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="faultload-parent-watch", daemon=True).start()


def main() -> None:
    _die_with_parent()
    if not callable(getattr(engine, "get_backend_classes", None)) or not callable(getattr(engine, "main", None)):
        print("faultload-engine: skyrl.tinker.engine has no get_backend_classes/main to patch", file=sys.stderr)
        sys.exit(3)
    engine.get_backend_classes = lambda backend_name, use_ray=False: (NullBackend, NullBackendConfig)
    print("faultload-engine: null backend", file=sys.stderr, flush=True)
    engine.main()


if __name__ == "__main__":
    main()
