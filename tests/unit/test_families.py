"""The server-family adapter interface: every family named in the model has an adapter with every part the
installer and the stack call and a contract in the model, SkyRL's is what the rest of the code was, and what
TuFT's lacks is refused."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from faultload.model import sdk
from faultload.model.family import CONTRACTS, FAMILY_NAMES
from faultload.model.switches import TUFT_FIXES
from faultload.model.target import parse_target
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.record.history import server_id_key
from faultload.targets.families.skyrl import launch_skyrl
from faultload.targets.family import FAMILIES, ServerFamily, family_of

PARTS = [name for name, _ in inspect.getmembers(ServerFamily) if not name.startswith("_")] + list(
    ServerFamily.__annotations__
)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_every_family_has_every_part_of_the_interface_and_the_models_contract(name: str):
    family = FAMILIES[name]
    assert family.name == name
    missing = [part for part in PARTS if not hasattr(family, part)]
    assert not missing, f"{name} lacks {missing}"
    assert name in CONTRACTS


def test_a_target_spec_names_its_family_and_a_url_has_none():
    for text in ("skyrl==0.4.0", "skyrl==0.3.0"):
        spec = parse_target(text)
        assert spec.family == "skyrl" and family_of(spec) is FAMILIES["skyrl"]
    with pytest.raises(ValueError, match="no family adapter"):
        family_of(parse_target("url=http://127.0.0.1:9"))


def test_a_url_target_is_judged_as_skyrl_unless_it_names_its_family():
    """A server someone else started has no adapter, but its family's contract judges it: a bare url= is SkyRL's,
    FAMILY+url= names another, and a name that is no family is refused in one line."""
    bare, tuft = parse_target("url=http://127.0.0.1:9"), parse_target("tuft+url=http://127.0.0.1:9/")
    assert (bare.kind, bare.family, bare.url) == ("url", "skyrl", "http://127.0.0.1:9")
    assert (tuft.kind, tuft.family, tuft.url, tuft.text) == (
        "url",
        "tuft",
        "http://127.0.0.1:9",
        "tuft+url=http://127.0.0.1:9/",
    )
    assert parse_target("skyrl+url=http://127.0.0.1:9").family == "skyrl"
    with pytest.raises(ValueError, match=r"'nimbus' is not a server family \(skyrl, tuft, hatchery, twinkle\)"):
        parse_target("nimbus+url=http://127.0.0.1:9")
    with pytest.raises(ValueError, match="expected url=http://HOST:PORT"):
        parse_target("tuft+url=http://127.0.0.1")


def test_skyrls_adapter_installs_and_launches_as_before():
    skyrl = FAMILIES["skyrl"]
    release = parse_target("skyrl==0.4.0")
    assert skyrl.own_install(release) == ["--ignore-requires-python", "--no-deps", "skyrl==0.4.0"]
    assert "tinker>=0.25,<0.26" in skyrl.requirements(release) and skyrl.needs_torch
    assert "transformers>=5.6.1,<=5.8.0" in skyrl.requirements(parse_target("skyrl==0.3.0"))
    assert inspect.signature(skyrl.launch).parameters.keys() >= {"spec", "python", "run_dir", "port", "router_url"}
    assert skyrl.launch.__func__.__code__.co_names.count(launch_skyrl.__name__) == 1


def test_the_sdk_module_states_no_servers_timer():
    """A server's hold, TTLs and session expiry are its family's contract alone: the SDK's module names none."""
    server_names = [
        name for name in dir(sdk) if name.isupper() and ("TTL" in name or name.startswith(("SERVER_", "SESSION_")))
    ]
    assert server_names == []


def test_tufts_adapter_installs_the_release_without_its_training_stacks():
    tuft = FAMILIES["tuft"]
    release = parse_target("tuft==0.2.2")
    assert release.family == "tuft" and release.venv_name == "tuft-0.2.2" and family_of(release) is tuft
    assert tuft.own_install(release) == ["--no-deps", "tuft==0.2.2", "tinker>=0.25,<0.26"]
    assert not tuft.needs_torch
    assert not {"torch", "vllm", "ray"} & {
        req.split("[")[0].split(">")[0].split("=")[0] for req in tuft.requirements(release)
    }


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"regress": ("retention",)},
            "tuft==0.2.2 has no regression switch 'retention' \\(regression switches it has: none\\)",
        ),
        (
            {"fixes": ("plain-tracebacks",)},
            f"tuft==0.2.2 has no fix switch 'plain-tracebacks' \\(fix switches it has: {', '.join(TUFT_FIXES)}\\)",
        ),
        ({"engine": "null"}, "engine null is not one tuft==0.2.2's launcher runs"),
        ({"knobs": ServerKnobs(retrieved_ttl_s=30.0)}, "tuft==0.2.2 has no setting retrieved_ttl_s"),
    ],
)
def test_what_a_family_lacks_is_refused_in_one_line(changes: dict, message: str):
    with pytest.raises(ValueError, match=message):
        TrialConfig(target="tuft==0.2.2", **changes).validate()
    TrialConfig(target="tuft==0.2.2", knobs=ServerKnobs(forwarding_timeout_s=30.0)).validate()
    TrialConfig(target="tuft==0.2.2", fixes=("newest-sdk-samples",)).validate()
    with pytest.raises(ValueError, match="skyrl==0.4.0 has no fix switch 'newest-sdk-samples'"):
        TrialConfig(target="skyrl==0.4.0", fixes=("newest-sdk-samples",)).validate()


def test_hatcherys_adapter_installs_the_release_without_its_gpu_stack():
    hatchery = FAMILIES["hatchery"]
    release = parse_target("hatchery==0.3.0")
    assert release.family == "hatchery" and release.venv_name == "hatchery-0.3.0" and family_of(release) is hatchery
    assert hatchery.own_install(release) == [
        "--no-deps",
        "--ignore-requires-python",
        "hatchery-core==0.3.0",
        "tinker>=0.25,<0.26",
    ]
    assert not hatchery.needs_torch and hatchery.package == "hatchery-core"
    assert not {"torch", "transformers", "peft"} & {
        req.split("[")[0].split(">")[0].split("=")[0] for req in hatchery.requirements(release)
    }
    with pytest.raises(ValueError, match="hatchery==0.3.0 has no setting forwarding_max_connections"):
        TrialConfig(target="hatchery==0.3.0", knobs=ServerKnobs(forwarding_max_connections=8)).validate()
    TrialConfig(target="hatchery==0.3.0", fixes=("sampling-session-answer",)).validate()


def test_hatcherys_candidate_fix_answers_the_sampling_session_itself():
    """Finding 11's fix (hatchery_fixes.py) on a test double of hatchery's envelope builder (the real one runs in
    tests/integration/test_hatchery.py): create_sampling_session answers its inline result, every other call
    its future's envelope."""
    from types import SimpleNamespace

    from faultload.targets import hatchery_fixes

    def envelope(job_id, user_id, operation, **kwargs):
        return {"request_id": "fut_1", "operation": operation, "status": "pending"}

    compat = SimpleNamespace(_future_response=envelope)
    assert hatchery_fixes.FIXES["sampling-session-answer"]({"tinker_compat": compat}).startswith("sampling-session")
    inline = {"type": "create_sampling_session", "sampling_session_id": "samp-smp_1-0-ab"}
    answer = compat._future_response("inline-smp_1", "u", "create_sampling_session", inline_result=inline)
    assert answer == inline and answer is not inline
    assert compat._future_response("job", "u", "sample")["request_id"] == "fut_1"


def test_hatcherys_proto_fix_encodes_a_json_result_as_the_sdk_reads_it():
    """Finding 12's fix (hatchery_fixes.py): a JSON sample result as hatchery answers it, re-encoded with tinker's
    own proto module, reads back (faultload's proto decoder, the SDK's wire form) as the JSON reads: every token,
    logprob, stop reason, prompt logprob (NaN for none) and top-k cell (masked as tinker masks); any other answer
    is left alone."""
    import json

    import numpy as np

    from faultload.client import decode
    from faultload.targets import hatchery_fixes

    body = json.dumps(
        {
            "sequences": [
                {"tokens": [11, 12, 13], "stop_reason": "length", "logprobs": [-0.5, -0.25, -1.0]},
                {"tokens": [21], "stop_reason": "stop", "logprobs": [-0.125]},
            ],
            "prompt_logprobs": [None, -0.5, -0.75],
            "topk_prompt_logprobs": [None, [[5, -0.1], [6, -0.2]], [[7, -0.3]]],
        }
    ).encode()
    pb = hatchery_fixes._tinker_public_pb2()
    proto, plain = decode.decode_proto(hatchery_fixes._as_proto(pb, body)), decode.decode_json(body)
    for got, want in zip(proto.sequences, plain.sequences, strict=True):
        assert got.stop_reason == want.stop_reason and np.array_equal(got.tokens, want.tokens)
        assert np.allclose(got.logprobs, want.logprobs)
    assert np.allclose(proto.prompt_logprobs, plain.prompt_logprobs, equal_nan=True)
    assert np.array_equal(proto.topk[0], plain.topk[0]) and np.allclose(proto.topk[1], plain.topk[1])
    for other in (b'{"type": "try_again"}', b'{"type": "request_failed", "error": "x"}', b'{"path": "p"}', b"<"):
        assert hatchery_fixes._as_proto(pb, other) is None


def test_tufts_sequence_tiebreak_fix_orders_equal_seq_ids_by_arrival():
    """Finding 14's fix (tuft_fixes.py) on a test double of TuFT 0.2.2's SequenceExecutor (its heap of
    ``(seq_id, func, kwargs, future)``, as tuft/sequence_executor.py has it; the real one runs in the finding's
    replay): two entries with one seq_id, function and arguments make the heap compare futures (TypeError); with
    the fix they go in arrival order."""
    import heapq
    from types import SimpleNamespace

    from faultload.targets import tuft_fixes

    class Executor:
        def __init__(self):
            self.heap = []

        async def submit(self, sequence_id, func, **kwargs):
            heapq.heappush(self.heap, (sequence_id, func, kwargs, asyncio.get_running_loop().create_future()))

    async def sample(**kwargs):
        return None

    async def twice(executor):
        await executor.submit(7, sample, prompt=1)
        await executor.submit(7, sample, prompt=1)

    with pytest.raises(TypeError, match="'<' not supported"):
        asyncio.run(twice(Executor()))
    message = tuft_fixes.FIXES["sequence-tiebreak"]({"sequence_executor": SimpleNamespace(SequenceExecutor=Executor)})
    assert message.startswith("sequence-tiebreak:")
    fixed = Executor()
    asyncio.run(twice(fixed))
    assert [entry[0][0] for entry in sorted(fixed.heap, key=lambda e: e[0])] == [7, 7]


def test_a_request_id_keys_the_history_as_an_integer_or_a_digest():
    assert server_id_key("12") == 12 and server_id_key("-7") == -7  # SkyRL's, which its log lines name
    uuid = "306134b7-6249-4a9e-a13f-63f13d484a6d"  # TuFT's
    assert server_id_key(uuid) == server_id_key(uuid) and 0 < server_id_key(uuid) < 2**62
    assert server_id_key(uuid) != server_id_key(uuid.replace("d", "e")) and server_id_key("0") != 0
    past = str(2**63)  # an integer id past the int64 column: keyed by its digest, not an OverflowError
    assert server_id_key(str(2**63 - 1)) == 2**63 - 1 and 0 < server_id_key(past) < 2**62


def test_tufts_candidate_fix_takes_the_newest_sdks_asample_and_answers_a_sequence_id_per_sample(monkeypatch):
    """Finding 7's fix (tuft_fixes.py), on tinker 0.25's own models as TuFT 0.2.2 uses them; the FutureStore is a
    test double with TuFT's enqueue signature (the real one runs in tests/integration/test_tuft.py)."""
    import tinker.types as types

    from faultload.targets import tuft_fixes

    for name in ("SampleRequest", "UntypedAPIFuture"):  # restored after the test: the fix replaces them
        monkeypatch.setattr(types, name, getattr(types, name))
    body = {
        "prompt": {"chunks": [{"tokens": [1, 2], "type": "encoded_text"}]},
        "sampling_params": {"max_tokens": 4},
        "num_samples": 2,
        "base_model": "m",
        "topk_sample_logprobs": 0,
        "record_stability_info": False,
    }
    with pytest.raises(ValueError, match="extra_forbidden|Extra inputs"):
        types.SampleRequest.model_validate(body)
    tuft_fixes.BEFORE_IMPORT["newest-sdk-samples"](types)
    request = types.SampleRequest.model_validate(body)

    class Store:
        async def enqueue(self, operation, user_id, **kwargs):
            return types.UntypedAPIFuture(request_id="r1", model_id=None)

    assert tuft_fixes.FIXES["newest-sdk-samples"]({"future_store": Store}).startswith("newest-sdk-samples:")
    sample = asyncio.run(Store().enqueue(None, "u", operation_type="sample", operation_args={"request": request}))
    assert sample.sample_sequence_ids == ["r1:0", "r1:1"]
    assert sample.model_dump()["sample_sequence_ids"] == ["r1:0", "r1:1"]  # what FastAPI's response model sends
    other = asyncio.run(Store().enqueue(None, "u", operation_type="forward_backward"))
    assert other.sample_sequence_ids is None
