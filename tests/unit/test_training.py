"""The training mix as data, its record, its report section and its invariants (no server: plain values).

The training logs here are built by hand, as test doubles of what the training
client records; the client itself runs against real SkyRL in
``tests/integration/test_training_integration.py``.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from faultload.checker.budgets import Budgets
from faultload.checker.compose import CHECKERS, checkers_for
from faultload.checker.inputs import CheckInputs
from faultload.checker.training import check_heartbeats_answered, check_training_futures
from faultload.client.training_bodies import TrainingCodec, encoding_for, expected_logprobs, target_tokens
from faultload.model.codec import config_from_dict, config_to_dict
from faultload.model.family import SKYRL_CONTRACT
from faultload.model.faults import Fault
from faultload.model.shape import LoadShape
from faultload.model.training import TrainingMix, parse_training
from faultload.model.trial import TrialConfig
from faultload.record.faults import AppliedFault, FaultLog
from faultload.record.history import ErrorClass, History, Outcome
from faultload.record.serverlog import classify_log
from faultload.record.training import TrainingLog, TrainingOp, TrainingRecorder, summarize
from faultload.suite.executor import describe_config

OK, FB, OS, HB, CM = (
    Outcome.OK,
    TrainingOp.FORWARD_BACKWARD,
    TrainingOp.OPTIM_STEP,
    TrainingOp.HEARTBEAT,
    TrainingOp.CREATE_MODEL,
)


def _log(rows) -> TrainingLog:
    recorder = TrainingRecorder()
    for row in rows:
        recorder.add(*row)
    return recorder.log()


def _inputs(log: TrainingLog | None, interrupted: bool = False) -> CheckInputs:
    return CheckInputs(
        history=History.empty(0),
        monitor=None,
        faults=None,
        shape=LoadShape(),
        training=log,
        interrupted=interrupted,
        contract=SKYRL_CONTRACT,
    )


def test_parse_training_forms():
    assert parse_training("32") == TrainingMix(trainers=32)
    assert parse_training("32x16") == TrainingMix(trainers=32, steps=16)
    assert parse_training("2x3:8@512") == TrainingMix(trainers=2, steps=3, datums=8, datum_tokens=512)
    for bad in ("x", "3y", "2x2:a@1", "0", "2x0", "2x1:0@5", "300"):
        with pytest.raises(ValueError, match="--trainers"):
            parse_training(bad)


def test_a_shape_with_training_round_trips_and_one_without_is_unchanged():
    shape = LoadShape(training=TrainingMix(trainers=4, steps=2, spread_s=1.5))
    shape.validate()
    assert LoadShape.from_json(shape.to_json()) == shape
    old = LoadShape().to_dict()
    del old["training"]  # a repro written before training existed
    assert LoadShape.from_dict(old) == LoadShape()
    with pytest.raises(ValueError, match="training.trainers must be int"):
        LoadShape.from_dict({"training": {"trainers": "4"}}).validate()
    with pytest.raises(ValueError, match="unknown training field"):
        LoadShape.from_dict({"training": {"trainerz": 4}})


def test_training_needs_the_null_engine_and_the_engine_round_trips():
    shape = LoadShape(training=TrainingMix(trainers=2))
    with pytest.raises(ValueError, match="training traffic needs engine null"):
        TrialConfig(target="skyrl==0.4.0", shape=shape).validate()
    config = TrialConfig(target="skyrl==0.4.0", shape=shape, engine="null", engine_s_per_token=0.001)
    config.validate()
    assert config.stack_config().engine == "null" and config.stack_config().engine_s_per_token == 0.001
    assert config_from_dict(config_to_dict(config)) == config
    with pytest.raises(ValueError, match="engine must be one of"):
        dataclasses.replace(config, engine="gpu").validate()
    # A url= target trains against its own engine.
    TrialConfig(target="url=http://127.0.0.1:9", shape=shape).validate()


def test_bodies_encode_per_version_and_results_are_checked_against_the_request():
    assert encoding_for("0.3.0") == "json" and encoding_for("0.4.0") == "proto" and encoding_for(None) == "proto"
    codec = TrainingCodec("json")
    targets = [target_tokens(3, 5, d, 6) for d in range(2)]
    good = {"loss_fn_outputs": [{"logprobs": {"data": expected_logprobs(t).tolist()}} for t in targets]}

    assert codec.check_forward_backward("application/json", json.dumps(good).encode(), 3, 5, 2, 6) is None
    # Step 5's result does not pass as step 6's (a result returned to the wrong call).
    assert "not trainer 3 step 6" in codec.check_forward_backward(
        "application/json", json.dumps(good).encode(), 3, 6, 2, 6
    )
    assert "1 outputs for 2 data" in codec.check_forward_backward(
        "application/json", json.dumps({"loss_fn_outputs": good["loss_fn_outputs"][:1]}).encode(), 3, 5, 2, 6
    )
    assert "undecodable" in codec.check_forward_backward("application/json", b"{", 3, 5, 2, 6)
    assert TrainingCodec.check_optim_step(b'{"metrics": {"skyrl.ai/learning_rate": 0.1}}') is not None
    assert TrainingCodec.check_optim_step(b'{"metrics": {"skyrl.ai/learning_rate": 0.0003}}') is None


def test_the_proto_body_is_the_sdks_encoding_zstd_compressed():
    import zstandard  # a declared dependency: never skipped
    from tinker.proto import tinker_public_pb2

    encoded = TrainingCodec("proto").forward_backward("model-1", 7, 2, 3, 4, 16)
    assert b"Content-Encoding: zstd" in encoded.headers
    message = tinker_public_pb2.ForwardBackwardRequest.FromString(zstandard.ZstdDecompressor().decompress(encoded.body))
    assert message.model_id == "model-1" and message.seq_id == 7 and len(message.data) == 4


def test_summary_counts_each_op_and_its_latency():
    log = _log(
        [
            (CM, 0, 0, 0.0, 0.1, 1.0, 2, OK),
            (FB, 0, 0, 1.0, 1.1, 1.5, 2, OK),
            (FB, 0, 1, 2.0, 2.1, math.nan, 3, Outcome.LOST, ErrorClass.HTTP_404, 404, "retrieve_future 9: HTTP 404"),
            (OS, 0, 0, 1.5, 1.6, math.nan, 1, Outcome.PENDING),
            (HB, 0, 0, 10.0, 10.2, 10.2, 1, OK),
        ]
    )
    summary = summarize(log)
    assert summary["forward_backward"]["requested"] == 2 and summary["forward_backward"]["lost"] == 1
    assert summary["forward_backward"]["latency_s"]["max"] == pytest.approx(0.5)
    assert summary["forward_backward"]["errors"] == {"http_404": 1}
    assert summary["optim_step"]["unfinished"] == 1 and summary["heartbeat"]["completed"] == 1
    again = TrainingLog.from_dict(log.to_dict())
    assert all(np.array_equal(again[n], log[n], equal_nan=True) for n in log.columns)
    assert again.examples == {"forward_backward:http_404": "retrieve_future 9: HTTP 404"}


def test_training_checkers_run_only_for_a_trial_that_trained():
    assert checkers_for(_inputs(None)) == CHECKERS
    names = [name for name, _ in checkers_for(_inputs(TrainingLog.empty()))]
    assert names[-2:] == ["training_futures", "heartbeats_answered"]


def test_a_lost_or_corrupt_training_future_is_a_violation_and_an_unfinished_one_only_when_not_stopped():
    ok_rows = [(CM, 0, 0, 0.0, 0.1, 1.0, 2, OK), (FB, 0, 0, 1.0, 1.1, 1.5, 2, OK)]
    assert check_training_futures(_inputs(_log(ok_rows)), Budgets()).ok is True
    lost = _log([*ok_rows, (FB, 0, 1, 2.0, 2.1, math.nan, 3, Outcome.LOST, ErrorClass.HTTP_404, 404, "gone")])
    verdict = check_training_futures(_inputs(lost), Budgets())
    assert verdict.ok is False and verdict.figure == 1 and "1 lost" in verdict.detail and "gone" in verdict.detail
    corrupt = _log([*ok_rows, (OS, 0, 0, 2.0, 2.1, math.nan, 2, Outcome.CORRUPT, ErrorClass.INTEGRITY, 200, "lr")])
    assert check_training_futures(_inputs(corrupt), Budgets()).ok is False
    pending = _log([*ok_rows, (OS, 0, 0, 2.0, 2.1, math.nan, 2, Outcome.PENDING)])
    assert check_training_futures(_inputs(pending), Budgets()).ok is False
    stopped = check_training_futures(_inputs(pending, interrupted=True), Budgets())
    assert stopped.ok is True and "1 unfinished" in stopped.detail
    assert check_training_futures(_inputs(_log([(HB, 0, 0, 1.0, 1.1, 1.1, 1, OK)])), Budgets()).ok is None


def test_heartbeats_fail_on_a_refusal_or_a_long_gap_and_are_unknown_when_none_was_due():
    beats = [(HB, 0, i, 10.0 * i, 10.0 * i + 0.1, 10.0 * i + 0.1, 1, OK) for i in range(1, 4)]
    assert check_heartbeats_answered(_inputs(_log(beats)), Budgets()).ok is True
    timed_out = _log([*beats, (HB, 0, 4, 40.0, 50.0, math.nan, 1, Outcome.FAILED, ErrorClass.TIMEOUT, 0, "slow")])
    verdict = check_heartbeats_answered(_inputs(timed_out), Budgets())
    assert verdict.ok is True and "1 timed out within a short gap (heartbeat_timeout_tolerated)" in verdict.detail
    refused = _log([*beats, (HB, 0, 4, 40.0, 40.1, math.nan, 1, Outcome.FAILED, ErrorClass.HTTP_5XX, 500, "boom")])
    verdict = check_heartbeats_answered(_inputs(refused), Budgets())
    assert verdict.ok is False and verdict.figure == 1 and "1 of 4 heartbeats failed (0 timed out)" in verdict.detail
    gap = _log([(HB, 1, 0, 10.0, 10.1, 10.1, 1, OK), (HB, 1, 1, 200.0, 200.1, 200.1, 1, OK)])
    verdict = check_heartbeats_answered(_inputs(gap), Budgets(heartbeat_gap_s=120.0))
    assert verdict.ok is False and "longest gap between answered heartbeats 190.0s" in verdict.detail
    assert check_heartbeats_answered(_inputs(_log([(CM, 0, 0, 0.0, 0.1, 1.0, 2, OK)])), Budgets()).ok is None


def test_a_starved_heartbeat_names_the_pool_exhaustion_the_server_log_shows():
    line = (
        "2026-12-02 23:10:01,412 - WARNING - faultload.dbpool: DB pool exhausted: 37 checkouts waited >= 1 s "
        "for a connection in the last 1 s (longest 9.41 s, 0 timed out); QueuePool size 5, overflow 10, timeout 30 s"
    )
    timed_out = _log(
        [
            (HB, 0, i, 10.0 + 20.0 * i, 20.0 + 20.0 * i, math.nan, 1, Outcome.FAILED, ErrorClass.TIMEOUT, 0, "slow")
            for i in range(8)
        ]
    )  # 160 s without an answered heartbeat
    inputs = dataclasses.replace(_inputs(timed_out), server_log=classify_log(line + "\n"))
    verdict = check_heartbeats_answered(inputs, Budgets())
    assert verdict.ok is False
    assert "server log: 1 pool_exhausted lines" in verdict.detail and "longest 9.41 s" in verdict.detail


def _restarted_at(at_s: float) -> FaultLog:
    restart = Fault("server", "restart", start_s=at_s)
    return FaultLog((AppliedFault(0, restart, applied_at_s=at_s, removed_at_s=at_s + 2.0),))


def test_calls_on_a_model_a_server_restart_took_are_the_restarts_not_the_servers():
    """0.4.0 after server:restart: '400 Model ... not loaded (likely stale request from previous server)'."""
    stale = (FB, 0, 1, 13.0, 13.1, 13.2, 1, Outcome.FAILED, ErrorClass.SERVER_FAILED, 400, "not loaded")
    rows = [
        (CM, 0, 0, 0.0, 0.1, 1.0, 1, OK),
        (FB, 0, 0, 2.0, 2.1, 3.0, 1, OK),
        stale,
        (CM, 1, 0, 12.5, 12.6, 12.7, 1, OK),  # created after the restart (10-12 s): its failures are its own
        (FB, 1, 0, 13.0, 13.1, 13.2, 1, Outcome.FAILED, ErrorClass.SERVER_FAILED, 400, "failed"),
    ]
    fatal = dataclasses.replace(
        _inputs(_log(rows)), faults=_restarted_at(10.0), fatal_fault_kinds=frozenset({"server:restart"})
    )
    verdict = check_training_futures(fatal, Budgets())
    assert verdict.ok is False and verdict.figure == 1 and "1 excused by a fatal fault" in verdict.detail
    not_fatal = dataclasses.replace(fatal, fatal_fault_kinds=frozenset())
    assert check_training_futures(not_fatal, Budgets()).figure == 2
    corrupt = [*rows[:2], (*stale[:7], Outcome.CORRUPT, ErrorClass.INTEGRITY, 200, "wrong logprobs")]
    assert check_training_futures(dataclasses.replace(fatal, training=_log(corrupt)), Budgets()).ok is False


def test_a_model_the_server_took_before_a_restart_is_lost_even_if_its_result_was_read_after():
    """The nightly fixed row, server:restart@2.05 with the edge cut 0.7-24.7 s: 13 trainers had their create_model
    accepted at 0.7-1.0 s and read its result at 24.8-26.3 s; every later call was '400 Model ... not loaded'."""
    rows = [
        (CM, 0, 0, 0.2, 0.9, 26.3, 3, OK),
        (FB, 0, 0, 26.3, 26.4, math.nan, 1, Outcome.FAILED, ErrorClass.SERVER_FAILED, 400, "not loaded"),
        (CM, 1, 0, 1.0, 26.4, 26.5, 9, OK),  # reached the restarted server: its failures are its own
        (FB, 1, 0, 26.5, 26.6, math.nan, 1, Outcome.FAILED, ErrorClass.SERVER_FAILED, 400, "failed"),
    ]
    inputs = dataclasses.replace(
        _inputs(_log(rows)), faults=_restarted_at(2.05), fatal_fault_kinds=frozenset({"server:restart"})
    )
    verdict = check_training_futures(inputs, Budgets())
    assert verdict.ok is False and verdict.figure == 1 and "1 excused by a fatal fault" in verdict.detail


def test_a_trial_line_names_its_training_mix():
    trained = TrialConfig(target="skyrl==0.4.0", shape=LoadShape(training=TrainingMix(32, 16, 4, 128)), engine="null")
    assert "train 32x16:4@128" in describe_config(trained)
    assert "train" not in describe_config(TrialConfig(target="skyrl==0.4.0"))


def test_a_training_call_never_answered_during_a_fatal_fault_is_not_excused():
    """A fault allows a definite error (the call failed), never silence (the call never ended)."""
    failed = (FB, 0, 0, 9.5, 9.6, 10.5, 1, Outcome.FAILED, ErrorClass.SERVER_FAILED, 500, "failed")
    rows = [(CM, 0, 0, 0.0, 0.1, 1.0, 1, OK), failed]
    fatal = dataclasses.replace(
        _inputs(_log(rows)), faults=_restarted_at(10.0), fatal_fault_kinds=frozenset({"server:restart"})
    )
    assert check_training_futures(fatal, Budgets()).ok is True  # failed in flight during the restart: its end
    silent = [rows[0], (*failed[:5], math.nan, 1, Outcome.PENDING, ErrorClass.NONE, 0, "")]
    verdict = check_training_futures(dataclasses.replace(fatal, training=_log(silent)), Budgets())
    assert verdict.ok is False and verdict.figure == 1 and "pending" in verdict.detail
