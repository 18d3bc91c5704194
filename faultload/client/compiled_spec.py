"""The one value the compiled client receives: a raw client's job with every number worked out.

Every timer is turned into trial seconds here, every derived count (slots per worker, the backoff table, the
429 pause) computed by the same Python the raw client uses, and the SDK's retry rules sent as the data
``sdk_rules.SDK_SAMPLING_RULES`` holds, so no rule or rounding is written twice.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from faultload.client import decode
from faultload.client.arrivals import arrival_offsets
from faultload.client.endpoint import json_headers, split_base_url
from faultload.client.job import WorkerJob
from faultload.client.raw import ABANDON_AFTER_S, STOP_CHECK_S
from faultload.client.sdk_rules import SDK_SAMPLING_RULES, backoff_s, rate_limit_pause_s
from faultload.model.sdk import SDK_REQUEST_TIMEOUT_S
from faultload.model.shape import LoadShape

_MAX_BACKOFF_STEPS = 64  # 2**64 s passes any cap a policy may state


def backoff_table(shape: LoadShape) -> list[float]:
    """The backoff after n earlier failures, scaled, for n = 0.. until it reaches the cap (then it repeats)."""
    cap = shape.policy.backoff_cap_s
    table = []
    for n in range(_MAX_BACKOFF_STEPS):
        table.append(shape.scaled(backoff_s(n, cap)))
        if 2.0**n >= cap:
            break
    return table


def client_spec(job: WorkerJob, out_dir: Path, counters_path: Path, arrivals_path: Path | None) -> dict[str, Any]:
    """The spec of ``job`` (a sampling job of a raw client); ``arrivals_path``: where its rows' arrival
    offsets were written (None for a burst)."""
    shape, policy = job.shape, job.shape.policy
    host, port, prefix = split_base_url(job.base_url)
    cap = shape.max_outstanding
    https = job.base_url.startswith("https://")
    return {
        "worker": job.worker,
        "host": host,
        "port": port,
        "prefix": prefix,
        "tls": {"ca_cert": job.access.ca_cert or "", "insecure": job.access.insecure} if https else None,
        "source_ip": job.source_ip or "",
        "headers": json_headers(job).decode("latin-1"),  # the compiled client sends each character as one byte
        "accept": decode.PROTO_CONTENT_TYPE if shape.accept == "proto" else "application/json",
        "session_id": job.sampling_session_id,
        "first": job.first,
        "count": job.count,
        "nonce_salt": job.nonce_salt,
        "num_samples": shape.num_samples,
        "result_tokens": shape.result_tokens,
        "prompt_extra": shape.prompt_extra_tokens,
        "outstanding": max(1, cap // shape.workers) if cap else 0,
        "submit": max(1, policy.submit_concurrency // shape.workers),
        "asample_timeout_s": shape.scaled(SDK_REQUEST_TIMEOUT_S),
        "poll_timeout_s": shape.scaled(policy.poll_timeout_s),
        "submit_window_s": shape.scaled(policy.submit_retry_window_s),
        "rate_limit_pause_s": shape.scaled(rate_limit_pause_s(shape.prompt_extra_tokens)),
        "keepalive_expiry_s": shape.scaled(policy.keepalive_expiry_s),
        "connect_timeout_s": policy.connect_timeout_s,  # unscaled, as the Python pool's
        "backoff_s": backoff_table(shape),
        "abandon_after_s": ABANDON_AFTER_S,
        "abandon_wait_s": shape.scaled(shape.abandon_polls.after_s),
        "seed": shape.seed & (2**64 - 1),
        "delay_fraction": shape.delay_polls.fraction,
        "delay_s": shape.scaled(shape.delay_polls.after_s),
        "abandon_fraction": shape.abandon_polls.fraction,
        "arrivals_path": str(arrivals_path) if arrivals_path is not None else "",
        "deadline_s": job.deadline_s,
        "rules": dataclasses.asdict(SDK_SAMPLING_RULES),
        "out_dir": str(out_dir),
        "counters_path": str(counters_path),
        "stop_check_s": STOP_CHECK_S,
    }


def write_arrivals(job: WorkerJob, path: Path) -> Path | None:
    """The job's rows' arrival offsets as float64 at ``path``; None (nothing written) for a burst."""
    offsets = arrival_offsets(job.shape, job.first, job.count)
    if offsets is None:
        return None
    offsets.astype("<f8").tofile(path)
    return path
