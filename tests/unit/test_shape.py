"""Shape and config parsing: LoadShape, poll behaviours, target specs, loopback checks, CLI args.

Pure parsing: nothing here sends traffic. ``require_loopback`` only resolves
names (a numeric address resolves without any network I/O).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from faultload.cli import from_args
from faultload.cli import parser as cli_parser
from faultload.model.shape import ClientPolicy, LoadShape, PollBehaviour, parse_poll_behaviour
from faultload.model.target import DEFAULT_TARGET, parse_target, require_loopback

# --------------------------------------------------------------------------- LoadShape.validate


def test_default_shape_is_valid():
    LoadShape().validate()  # must not raise


BAD_FIELDS = [
    ({"requests": 0}, "requests"),
    ({"requests": -3}, "requests"),
    ({"result_tokens": 0}, "result_tokens"),
    ({"result_tokens": 2_000_001}, "result_tokens"),
    ({"num_samples": 0}, "num_samples"),
    ({"num_samples": 65}, "num_samples"),
    ({"prompt_extra_tokens": -1}, "prompt_extra_tokens"),
    ({"prompt_extra_tokens": 100_001}, "prompt_extra_tokens"),
    ({"max_outstanding": -1}, "max_outstanding"),
    ({"workers": 0}, "workers"),
    ({"workers": 65}, "workers"),
    ({"client": "curl"}, "client"),
    ({"accept": "xml"}, "accept"),
    ({"time_scale": 0.0}, "time_scale"),
    ({"time_scale": -1.0}, "time_scale"),
    ({"time_scale": 11.0}, "time_scale"),
    ({"time_scale": float("nan")}, "time_scale"),
    ({"policy": ClientPolicy(submit_concurrency=0)}, "submit_concurrency"),
    ({"policy": ClientPolicy(poll_timeout_s=0.0)}, "poll_timeout_s"),
    ({"policy": ClientPolicy(submit_retry_window_s=-1.0)}, "submit_retry_window_s"),
    ({"policy": ClientPolicy(submit_retry_window_s=float("inf"))}, "submit_retry_window_s"),
    ({"policy": ClientPolicy(backoff_cap_s=-1.0)}, "backoff_cap_s"),
    ({"policy": ClientPolicy(connect_timeout_s=0.0)}, "connect_timeout_s"),
    ({"delay_polls": PollBehaviour(1.5, 1.0)}, "delay_polls"),
    ({"delay_polls": PollBehaviour(0.5, -1.0)}, "delay_polls"),
    ({"abandon_polls": PollBehaviour(-0.1, 1.0)}, "abandon_polls"),
    ({"abandon_polls": PollBehaviour(0.5, -2.0)}, "abandon_polls"),
]


@pytest.mark.parametrize("change, field_name", BAD_FIELDS, ids=[f"{f}-{i}" for i, (c, f) in enumerate(BAD_FIELDS)])
def test_validate_names_the_bad_field(change, field_name):
    shape = dataclasses.replace(LoadShape(), **change)
    with pytest.raises(ValueError) as info:
        shape.validate()
    message = str(info.value)
    assert field_name in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "change, field_name",
    [
        ({"requests": "10"}, "requests"),
        ({"time_scale": "fast"}, "time_scale"),
        ({"workers": None}, "workers"),
        ({"requests": 2.5}, "requests"),
    ],
)
def test_validate_wrong_type_is_a_value_error_naming_the_field(change, field_name):
    """A repro file edited by hand can carry a string where a number belongs:
    that is bad input (ValueError naming the field), not a TypeError from a comparison."""
    shape = dataclasses.replace(LoadShape(), **change)
    with pytest.raises(ValueError, match=field_name):
        shape.validate()


def test_scaled_multiplies_by_time_scale():
    assert LoadShape(time_scale=0.25).scaled(40.0) == pytest.approx(10.0)


# --------------------------------------------------------------------------- JSON round trip


def test_json_round_trip_equal():
    shape = LoadShape(
        requests=77,
        result_tokens=5,
        num_samples=3,
        prompt_extra_tokens=9,
        max_outstanding=11,
        workers=2,
        client="sdk",
        accept="json",
        time_scale=0.5,
        delay_polls=PollBehaviour(0.25, 3.0),
        abandon_polls=PollBehaviour(1.0, 0.5),
        policy=ClientPolicy(submit_concurrency=7, submit_retry_window_s=9.0),
        seed=42,
    )
    text = shape.to_json()
    json.loads(text)  # it is JSON
    back = LoadShape.from_json(text)
    assert back == shape
    assert isinstance(back.delay_polls, PollBehaviour) and isinstance(back.policy, ClientPolicy)
    assert back.to_json() == text


def test_old_repro_policy_with_the_old_defaults_loads():
    """A repro written before the raw client followed the SDK carries max_connection_retries=16 and
    max_polls=1000, which meant "the SDK's rules": it loads, with today's SDK rules."""
    data = LoadShape().to_dict()
    data["policy"].update(max_connection_retries=16, max_polls=1000)
    assert LoadShape.from_dict(data) == LoadShape()


@pytest.mark.parametrize("name, value", [("max_connection_retries", 3), ("max_polls", 9)])
def test_old_repro_policy_with_other_limits_is_refused_in_one_line(name, value):
    data = LoadShape().to_dict()
    data["policy"][name] = value
    with pytest.raises(ValueError) as info:
        LoadShape.from_dict(data)
    message = str(info.value)
    assert f"policy.{name}={value}" in message and "no longer a setting" in message and "\n" not in message


def test_from_json_defaults_missing_fields():
    assert LoadShape.from_json('{"requests": 5}') == LoadShape(requests=5)


def test_from_json_rejects_unknown_top_level_field():
    data = json.loads(LoadShape().to_json())
    data["reqests"] = 5
    with pytest.raises(ValueError, match="reqests"):
        LoadShape.from_json(json.dumps(data))


@pytest.mark.parametrize("nested", ["policy", "delay_polls", "abandon_polls"])
def test_from_json_rejects_unknown_nested_field_as_value_error(nested):
    data = json.loads(LoadShape().to_json())
    data[nested]["bogus_knob"] = 1
    with pytest.raises(ValueError, match="bogus_knob"):
        LoadShape.from_json(json.dumps(data))


# --------------------------------------------------------------------------- --delay-polls / --abandon-polls


@pytest.mark.parametrize(
    "text, expected",
    [("0.5@10", PollBehaviour(0.5, 10.0)), ("1@0", PollBehaviour(1.0, 0.0)), ("0@2.5", PollBehaviour(0.0, 2.5))],
)
def test_parse_poll_behaviour_good(text, expected):
    assert parse_poll_behaviour(text, "--delay-polls") == expected


@pytest.mark.parametrize("text", ["0.5", "@", "x@1", "0.5@y", "1.5@1", "-0.1@1", "0.5@-1", "nan@1", ""])
def test_parse_poll_behaviour_bad(text):
    with pytest.raises(ValueError) as info:
        parse_poll_behaviour(text, "--abandon-polls")
    assert "--abandon-polls" in str(info.value)


# --------------------------------------------------------------------------- target specs


def test_parse_release():
    spec = parse_target("skyrl==0.4.0")
    assert (spec.kind, spec.version, spec.venv_name) == ("release", "0.4.0", "skyrl-0.4.0")
    assert parse_target(" skyrl==0.3.0 ").version == "0.3.0"
    assert parse_target("skyrl==1.2.3rc1").version == "1.2.3rc1"
    assert parse_target(DEFAULT_TARGET).kind == "release"


def test_parse_checkout(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='skyrl'\n")
    spec = parse_target(f"skyrl@{tmp_path}")
    assert spec.kind == "checkout"
    assert spec.path == str(tmp_path.resolve())
    assert spec.venv_name.startswith("skyrl-checkout-")
    other = tmp_path / "other"
    other.mkdir()
    (other / "setup.py").write_text("")
    assert parse_target(f"skyrl@{other}").venv_name != spec.venv_name


def test_parse_checkout_needs_existing_dir_with_pyproject(tmp_path: Path):
    with pytest.raises(ValueError, match="not a directory"):
        parse_target(f"skyrl@{tmp_path / 'missing'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="pyproject"):
        parse_target(f"skyrl@{empty}")
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        parse_target(f"skyrl@{afile}")


def test_parse_url():
    spec = parse_target("url=http://127.0.0.1:8000/")
    assert (spec.kind, spec.url) == ("url", "http://127.0.0.1:8000")


@pytest.mark.parametrize(
    "text",
    [
        "skyrl",
        "skyrl==",
        "skyrl==0.4",
        "skyrl==abc",
        "skyrl=0.4.0",
        "SKYRL==0.4.0",
        "skyrl>=0.4.0",
        "url=",
        "url=ftp://127.0.0.1:8000",
        "url=http://127.0.0.1",
        "url=127.0.0.1:8000",
        "url=http://:8000",
        "url=http://127.0.0.1:notaport",
        "url=http://127.0.0.1:99999",
        "url=http://127.0.0.1:0",
        "http://127.0.0.1:8000",
        "",
    ],
)
def test_parse_bad_targets_one_line_naming_the_target(text):
    with pytest.raises(ValueError) as info:
        parse_target(text)
    message = str(info.value)
    assert "\n" not in message
    assert "target" in message and repr(text.strip()) in message


# --------------------------------------------------------------------------- loopback only (resolve, never connect)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.5:8000", "http://127.0.0.1:1", "http://localhost:8000", "http://[::1]:8000"]
)
def test_loopback_allowed(url):
    require_loopback(url, allow_remote=False)


@pytest.mark.parametrize("url", ["http://10.1.2.3:8000", "http://no-such-host.invalid:8000", "http://8.8.8.8:80"])
def test_non_loopback_refused_without_allow_remote(url):
    with pytest.raises(ValueError, match="allow-remote"):
        require_loopback(url, allow_remote=False)


@pytest.mark.parametrize("url", ["http://10.1.2.3:8000", "http://no-such-host.invalid:8000"])
def test_non_loopback_allowed_with_allow_remote(url):
    require_loopback(url, allow_remote=True)  # must not raise (and resolves nothing)


# --------------------------------------------------------------------------- from_args.config_from_args


def _args(*argv: str):
    return cli_parser.build_parser().parse_args(["run", *argv])


def test_config_from_args_builds_the_shape_and_router():
    config = from_args.config_from_args(
        _args(
            "--requests",
            "300",
            "--result-tokens",
            "16",
            "--num-samples",
            "2",
            "--workers",
            "3",
            "--max-outstanding",
            "100",
            "--client",
            "raw",
            "--accept",
            "json",
            "--time-scale",
            "0.1",
            "--delay-polls",
            "0.5@4",
            "--abandon-polls",
            "0.25@2",
            "--seed",
            "7",
            "--router-mode",
            "barrier",
            "--regress",
            "retention",
            "--regress",
            "keepalive",
            "--retrieved-ttl",
            "30",
            "--server-port",
            "0",
            "--max-wall",
            "60",
        )
    )
    shape = config.shape
    assert (shape.requests, shape.result_tokens, shape.num_samples, shape.workers) == (300, 16, 2, 3)
    assert (shape.max_outstanding, shape.accept, shape.time_scale, shape.seed) == (100, "json", 0.1, 7)
    assert shape.delay_polls == PollBehaviour(0.5, 4.0)
    assert shape.abandon_polls == PollBehaviour(0.25, 2.0)
    assert shape.policy == ClientPolicy()
    assert config.router.mode == "barrier"
    assert config.router.barrier == 100  # defaults to min(requests, max_outstanding)
    assert config.regress == ("retention", "keepalive")
    assert config.knobs.retrieved_ttl_s == 30.0
    assert config.max_wall_s == 60.0
    assert config.target == DEFAULT_TARGET


def test_config_from_args_defaults_match_load_shape_defaults():
    shape = from_args.config_from_args(_args()).shape
    assert shape == LoadShape()


def test_config_from_args_barrier_without_cap_uses_requests():
    config = from_args.config_from_args(_args("--requests", "50", "--max-outstanding", "0", "--router-mode", "barrier"))
    assert config.router.barrier == 50


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--requests", "0"], "requests"),
        (["--time-scale", "0"], "time_scale"),
        (["--workers", "0"], "workers"),
        (["--target", "skyrl=1"], "target"),
        (["--target", "url=http://10.1.2.3:8000"], "allow-remote"),
        (["--target", "url=http://127.0.0.1:8000", "--regress", "retention"], "--regress"),
        (["--delay-polls", "2@1"], "--delay-polls"),
        (["--max-wall", "0"], "max_wall_s"),
        (["--server-port", "70000"], "server_port"),
        (["--router-mode", "latency", "--max-num-seqs", "0"], "max_num_seqs"),
    ],
)
def test_config_from_args_rejects_bad_values(argv, needle):
    with pytest.raises(ValueError, match=needle.replace("-", r"\-")):
        from_args.config_from_args(_args(*argv))


def test_config_from_args_url_with_allow_remote_is_accepted():
    config = from_args.config_from_args(_args("--target", "url=http://10.1.2.3:8000", "--allow-remote"))
    assert config.allow_remote is True


@pytest.mark.parametrize(
    "argv", [["--requests", "-1"], ["--client", "grpc"], ["--accept", "xml"], ["--requests", "ten"]]
)
def test_parser_rejects_bad_flag_values(argv):
    with pytest.raises(cli_parser.UsageError):
        _args(*argv)


def test_a_trial_parses_its_target_once(monkeypatch) -> None:
    """validate(), the stack's settings and a pickled copy all hold the one parse of the config's target."""
    import pickle

    from faultload.model import trial as trial_model

    calls: list[str] = []
    monkeypatch.setattr(trial_model, "parse_target", lambda text: calls.append(text) or parse_target(text))
    config = trial_model.TrialConfig(target="skyrl==0.4.0")
    spec = config.validate()
    assert config.stack_config().spec is spec and config.stack_config().target == "skyrl==0.4.0"
    assert pickle.loads(pickle.dumps(config)).spec == spec
    assert calls == ["skyrl==0.4.0"]
