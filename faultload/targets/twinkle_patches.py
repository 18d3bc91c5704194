"""What faultload changes in a launched twinkle-kit server, each patch point checked (a missing one: exit 3).

Runs under the target's Python, imported by ``twinkle_launch.py`` (the Ray driver) and, as the Ray workers'
``worker_process_setup_hook``, by every Ray worker (where twinkle's own hook runs first):

- sampling: the mock sampler's ``MockSampler.sample`` (the CPU stand-in for vLLM, inside the sampler replica)
  sends each sample to faultload's router (``twinkle_forwarding.py``) where a GPU sampler would run the model;
- loopback: Ray's node on 127.0.0.2 (Ray rewrites 127.0.0.1 to the machine's address), Serve's HTTP proxy
  on 127.0.0.1 (the config's ``http_options``);
- logs: Ray's worker output reaches the driver's log without its ``(name pid=…)`` prefix and undeduplicated
  (``RAY_DISABLE_WORKER_LOG_PREFIX``, ``RAY_DEDUP_LOGS``, set by the adapter), so that each line starts with
  its own timestamp (twinkle's, Ray's and Serve's formats, which ``faultload.record.serverlog`` reads);
- timers, times the trial's scale: the poll hold (``TWINKLE_LONG_POLL_TIMEOUT``, 30 s: an environment
  variable the gateway reads per poll, given to every worker), and ``ServerState``'s expiry (86,400 s) and
  cleanup interval (3,600 s);
- warm-up: once deployed, one sample through the gateway, the sampler and the router (``warm_up``), so that
  the sampler's first-sample start-up is not in the trial's baseline;
- the candidate fixes the spec names (``twinkle_fixes.FIXES``), in every worker;
- shutdown: faultload's stop kills the launcher's whole session, so Serve's graceful shutdown (over 25 s)
  is skipped: SIGTERM ends the driver at once.
"""

from __future__ import annotations

import http.client
import json
import os
import sys

import launch_logs
import ray
import twinkle_fixes
import twinkle_forwarding
from launch_logs import fail, installed_version
from tinker import types as tinker_types
from twinkle.data_format import SampledSequence, SampleResponse, SamplingParams
from twinkle.server.config import ServerConfig
from twinkle.server.launcher.env_propagation import build_propagated_env_vars
from twinkle.server.launcher.server_launcher import ServerLauncher
from twinkle.server.sampler import tinker_handlers
from twinkle.server.sampler.backends import mock_sampler
from twinkle.server.state import server_state
from twinkle.server.utils import ray_serve_patch

# The environment variable naming the launch spec, for the Ray workers' hook (set by twinkle_launch.py).
SPEC_ENV = "FAULTLOAD_TWINKLE_SPEC"
NODE_ADDRESS = "127.0.0.2"
# twinkle's ResourceManager asserts a node offers at least this many logical CPUs (whatever the machine has).
RAY_CPUS = 4
NAMESPACE = "faultload_twinkle"
HOLD_ENV = "TWINKLE_LONG_POLL_TIMEOUT"  # the gateway reads it at every poll (default 30 s)
HOLD_S = 30.0
# The warm-up sample's launch log lines (the adapter waits for one of them), its bound, each call's timeout.
WARMED_UP = "warmed up"
WARM_UP_FAILED = "warm-up sample failed:"
WARM_UP_POLLS = 8
WARM_UP_TIMEOUT_S = 60.0
EXPIRY_S = 86400.0  # ServerState's expiration_timeout default
CLEANUP_S = 3600.0  # ServerState's cleanup_interval default


def config(spec: dict) -> dict:
    """twinkle's ServerConfig: the Tinker gateway and the mock sampler, on 127.0.0.1:PORT, state in memory."""
    return {
        "ray_namespace": NAMESPACE,
        "proxy_location": "HeadOnly",
        "http_options": {"host": "127.0.0.1", "port": spec["port"]},
        "telemetry": {"enabled": False},
        "persistence": {"mode": "memory"},
        "applications": [
            {
                "name": "server",
                "route_prefix": "/api/v1",
                "import_path": "server",
                "args": {"supported_models": [spec["model"]]},
                "deployments": [_deployment("GatewayServer")],
            },
            {
                "name": "sampler",
                # the gateway sends a sample to {prefix}/sampler/{base_model}/tinker/asample
                "route_prefix": f"/api/v1/sampler/{spec['model']}",
                "import_path": "sampler",
                "args": {
                    "sampler_type": "mock",
                    "model_id": spec["model"],
                    "nproc_per_node": 1,
                    "device_group": {"name": "sampler", "ranks": 1, "device_type": "cpu"},
                    "device_mesh": {"device_type": "cpu", "dp_size": 1},
                    # its rate limiter's defaults would pace a burst; the load's own shape decides
                    "queue_config": {"rps_limit": 1_000_000, "tps_limit": 1_000_000_000},
                },
                "deployments": [_deployment("SamplerManagement")],
            },
        ],
    }


def _deployment(name: str) -> dict:
    return {"name": name, "num_replicas": 1, "max_ongoing_requests": 100_000, "ray_actor_options": {"num_cpus": 0.1}}


def check_patch_points() -> list[str]:
    """In the driver: every module and name the workers' hook patches exists in this release."""

    points = {
        "MockSampler.sample": getattr(mock_sampler.MockSampler, "sample", None),
        "MockSampler._normalize_inputs": getattr(mock_sampler.MockSampler, "_normalize_inputs", None),
        "ServerState.__init__": getattr(server_state.ServerState, "__init__", None),
        "ray_serve_patch._apply_patch_in_worker_process": getattr(
            ray_serve_patch, "_apply_patch_in_worker_process", None
        ),
        "ServerLauncher._shutdown": getattr(ServerLauncher, "_shutdown", None),
        "tinker_handlers.SamplingParams": getattr(tinker_handlers, "SamplingParams", None),
        "tinker.types.SampleResponse": getattr(tinker_types, "SampleResponse", None),
    }
    missing = [name for name, found in points.items() if found is None]
    if missing:
        fail(f"patch points {', '.join(missing)} not found in twinkle-kit {version()}")
    return ["sampling -> router", "Serve on 127.0.0.1, Ray on 127.0.0.2", "worker logs unprefixed"]


def worker_setup() -> None:
    """Ray's worker_process_setup_hook: twinkle's own hook, then faultload's patches, in every Ray worker."""
    ray_serve_patch._apply_patch_in_worker_process()
    with open(os.environ[SPEC_ENV], encoding="utf-8") as fh:
        spec = json.load(fh)
    _forward_samples(twinkle_forwarding.RouterSampler(spec["router_url"], spec["model"], spec["forward_timeout_s"]))
    _scale_state_timers(spec["time_scale"])
    for name in spec.get("fixes", []):
        twinkle_fixes.FIXES[name]({"SamplingParams": SamplingParams, "SampleResponse": tinker_types.SampleResponse})


def _forward_samples(sampler: twinkle_forwarding.RouterSampler) -> None:
    mock = mock_sampler.MockSampler

    def sample(self, inputs, sampling_params=None, adapter_name="", *, num_samples=1, **kwargs):
        prompts = [dict(p) if isinstance(p, dict) else {} for p in mock._normalize_inputs(inputs)]
        choices, prompt_part = sampler.sample(
            prompts[0].get("input_ids") or [], sampling_params, len(prompts) * num_samples
        )
        responses = []
        for i, prompt in enumerate(prompts):
            sequences = []
            for tokens, logprobs, stop in choices[i * num_samples : (i + 1) * num_samples]:
                sequences.append(
                    SampledSequence(
                        stop_reason=stop,
                        tokens=tokens,
                        logprobs=[[(t, lp)] for t, lp in zip(tokens, logprobs)],
                        decoded=None,
                        new_input_feature=mock._build_new_input_feature(prompt, tokens),
                    )
                )
            responses.append(SampleResponse(sequences=sequences, **prompt_part))
        return responses

    mock.sample = sample


def _scale_state_timers(scale: float) -> None:
    init = server_state.ServerState.__init__

    def __init__(self, *args, expiration_timeout: float = EXPIRY_S, cleanup_interval: float = CLEANUP_S, **kwargs):
        init(
            self,
            *args,
            expiration_timeout=expiration_timeout * scale,
            cleanup_interval=cleanup_interval * scale,
            **kwargs,
        )

    server_state.ServerState.__init__ = __init__


def version() -> str:
    return installed_version("twinkle-kit")


def serve(spec: dict) -> None:
    """Ray on 127.0.0.2 (started by this process, its workers running ``worker_setup``), then twinkle's own
    ``ServerLauncher``, which deploys the gateway and the sampler and blocks until SIGTERM."""

    launch_logs.timestamp_logs()
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(build_propagated_env_vars() or {})
    env.update({"PYTHONPATH": here, SPEC_ENV: os.environ[SPEC_ENV], HOLD_ENV: f"{HOLD_S * spec['time_scale']:g}"})
    ray.init(
        _node_ip_address=NODE_ADDRESS,
        num_cpus=RAY_CPUS,
        num_gpus=0,
        include_dashboard=False,
        _temp_dir=spec["ray_temp_dir"],
        namespace=NAMESPACE,
        runtime_env={"worker_process_setup_hook": "twinkle_patches.worker_setup", "env_vars": env},
    )
    ServerLauncher._shutdown = lambda self: sys.stderr.write("faultload-launch: stopped (Serve's shutdown skipped)\n")
    launcher = ServerLauncher(ServerConfig.model_validate(config(spec)))
    deploy = launcher._deploy_application

    def _deploy_application(app_spec) -> None:
        deploy(app_spec)
        if app_spec.name == "sampler":  # the last: warm it before the trial takes its baseline
            print(f"faultload-launch: {warm_up(spec)}", file=sys.stderr, flush=True)

    launcher._deploy_application = _deploy_application
    launcher.launch()


def warm_up(spec: dict) -> str:
    """One sample through the gateway, the sampler and faultload's router: twinkle's sampler replica starts its
    task queue's worker and imports what sampling needs at its first sample (4.7 s, ~800 MiB and ~500 fds
    over the tree), which is start-up, not the trial's. One kept-alive connection, as the SDK's: Serve cancels
    what a request started when its client goes, the sample's background task included. The launch log line it
    returns says how it went."""
    conn = http.client.HTTPConnection("127.0.0.1", spec["port"], timeout=WARM_UP_TIMEOUT_S)
    try:
        session = _post(
            conn, "create_session", {"tags": ["faultload-warm-up"], "user_metadata": {}, "sdk_version": "0.16.1"}
        )
        sampling = _post(
            conn,
            "create_sampling_session",
            {"session_id": session["session_id"], "sampling_session_seq_id": 0, "base_model": spec["model"]},
        )
        future = _post(
            conn,
            "asample",
            {
                "sampling_session_id": sampling["sampling_session_id"],
                "seq_id": 0,
                "num_samples": 1,
                "prompt": {"chunks": [{"type": "encoded_text", "tokens": spec["warm_up_prompt"]}]},
                "sampling_params": {"max_tokens": 1},
            },
        )
        for _ in range(WARM_UP_POLLS):
            answer = _post(conn, "retrieve_future", {"request_id": future["request_id"]})
            if answer.get("type") != "try_again":
                break
        if "sequences" not in answer:
            return f"{WARM_UP_FAILED} {json.dumps(answer)[:300]}"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{WARM_UP_FAILED} {type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return WARMED_UP


def _post(conn: http.client.HTTPConnection, route: str, body: dict) -> dict:
    conn.request("POST", f"/api/v1/{route}", json.dumps(body), {"Content-Type": "application/json"})
    answer = conn.getresponse()
    payload = answer.read()
    if answer.status != 200:
        raise ValueError(f"{route}: HTTP {answer.status}: {payload[:200]!r}")
    return json.loads(payload)
