"""Report merging (faultload.store.report) from a TrialResult built by hand.

Two workers' histories and histograms are constructed here, so every number
the report shows can be computed independently.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from faultload.client.job import WorkerResult
from faultload.model.faults import parse_fault
from faultload.model.shape import LoadShape
from faultload.model.trial import TrialConfig
from faultload.record.faults import AppliedFault, FaultLog
from faultload.record.histogram import Histogram
from faultload.record.history import ErrorClass, History, Outcome
from faultload.record.samples import SAMPLE_FIELDS, MonitorSamples, ProcessSnapshot
from faultload.record.trial import TrialResult, WorkerSummary
from faultload.store import report

REQUESTED = 12  # two more than the workers' rows: a slice of the load never reported

# Worker 0: four OK (one of them after a reset), one still pending when the trial stopped.
W0_E2E = [0.1, 0.2, 0.3, 0.4]
# Worker 1: three OK, one LOST (404), one CORRUPT (integrity).
W1_E2E = [1.0, 2.0, 3.0, 0.5, 0.6]


def _history(worker: int, e2e: list[float], outcomes: list[Outcome], errors: list[ErrorClass], pending: int) -> History:
    n = len(e2e) + pending
    h = History.empty(n)
    h["worker"][:] = worker
    h["nonce"][:] = np.arange(n) + 100 * worker
    h["submit_start"][:] = np.arange(n) * 0.01
    h["submit_end"][:] = h["submit_start"] + 0.005 * (1 + worker)
    h["done"][: len(e2e)] = h["submit_start"][: len(e2e)] + np.asarray(e2e)
    h["server_id"][:] = np.arange(n) + 1
    h["attempts"][:] = 2
    for i, (outcome, error) in enumerate(zip(outcomes, errors)):
        h["outcome"][i] = outcome
        h["error"][i] = error
    return h


def _worker(worker: int, history: History, examples: dict[str, str]) -> WorkerResult:
    submit, e2e = Histogram(), Histogram()
    submit.record_many(history["submit_end"] - history["submit_start"])
    e2e.record_many(history["done"] - history["submit_start"])  # NaN (never done) is skipped
    return WorkerResult(worker, history, submit.to_state(), e2e.to_state(), examples, cpu_s=0.5 + worker)


@pytest.fixture
def result() -> TrialResult:
    h0 = _history(
        0, W0_E2E, [Outcome.OK] * 4, [ErrorClass.NONE, ErrorClass.RESET, ErrorClass.NONE, ErrorClass.NONE], pending=1
    )
    h0["submit_retries"][1] = 1
    h0["transport_errors"][1] = 1
    h0["attempts"][1] = 3
    h1 = _history(
        1,
        W1_E2E,
        [Outcome.OK] * 3 + [Outcome.LOST, Outcome.CORRUPT],
        [ErrorClass.NONE] * 3 + [ErrorClass.HTTP_404, ErrorClass.INTEGRITY],
        pending=0,
    )
    h1["repolls"][0] = 2
    h1["attempts"][0] = 4
    ran = [
        _worker(0, h0, {"reset": "asample: ServerDisconnectedError: Server disconnected"}),
        _worker(
            1,
            h1,
            {
                "http_404": "retrieve_future 4: HTTP 404: b'Future not found'",
                "integrity": "result of nonce 104: sample 0: tokens do not match nonce 104",
            },
        ),
    ]
    samples = {name: np.full(3, -1.0) for name in SAMPLE_FIELDS}
    samples["t"] = np.array([0.0, 0.5, 1.0])
    samples["rss"] = np.array([100e6, 300e6, 200e6])
    samples["fds"] = np.array([10.0, 50.0, 12.0])
    samples["cpu_s"] = np.array([1.0, 2.0, 3.0])
    monitor = MonitorSamples(
        samples=samples,
        healthz_t=np.array([0.0, 0.5, 1.0]),
        healthz_latency_s=np.array([0.001, 0.002, 0.5]),
        healthz_ok=np.array([True, True, False]),
        baseline=ProcessSnapshot(rss=100_000_000, fds=10, cpu_s=1.0),
        drained=ProcessSnapshot(rss=110_000_000, fds=11, cpu_s=3.0),
    )
    config = TrialConfig(target="skyrl==0.4.0", shape=LoadShape(requests=REQUESTED, workers=2))
    return TrialResult(
        config=config,
        history=History.merge(w.history for w in ran),
        workers=[WorkerSummary.of(w) for w in ran],  # as the trial keeps them once it merged their histories
        monitor=monitor,
        router_stats={"received": 10, "completed": 9, "peak_in_flight": 6},
        server={"spec": "skyrl==0.4.0", "version": "0.4.0", "pid": 4242, "url": "http://127.0.0.1:9", "log_tail": "x"},
        wall_s=5.0,
        load_s=2.0,
        cpu={"workers_s": 1.0, "router_s": 0.5, "server_s": 2.0, "monitor_and_parent_s": 0.5},
    )


def test_contract_keys_present(result):
    rep = report.build_report(result)
    missing = [k for k in report.CONTRACT_KEYS if k not in rep]
    assert not missing
    assert rep["report_version"] == report.REPORT_VERSION


def test_counts(result):
    rep = report.build_report(result)
    assert rep["requested"] == REQUESTED
    assert rep["completed"] == 7
    assert rep["failed"] == 2  # LOST + CORRUPT
    assert rep["not_finished"] == 1 + 2  # one PENDING row + two requests no worker reported
    assert rep["completed"] + rep["failed"] + rep["not_finished"] == rep["requested"]
    assert rep["outcomes"]["ok"] == 7 and rep["outcomes"]["lost"] == 1 and rep["outcomes"]["corrupt"] == 1
    assert rep["outcomes"]["pending"] == 1
    expected = {"http_attempts": 2 * 10 + 1 + 2, "submit_retries": 1, "repolls": 2, "transport_errors": 1}
    assert {k: rep["attempts"][k] for k in expected} == expected  # the report only ever adds keys
    assert rep["throughput_per_s"] == pytest.approx(7 / 2.0)
    assert (rep["wall_s"], rep["load_s"]) == (5.0, 2.0)


def test_errors_by_class_with_examples(result):
    errors = report.build_report(result)["errors"]
    assert set(errors) == {"reset", "http_404", "integrity"}
    assert errors["http_404"]["count"] == 1 and "404" in errors["http_404"]["example"]
    assert errors["integrity"]["count"] == 1 and "do not match" in errors["integrity"]["example"]
    # A request that succeeded after a reset still shows its last error.
    assert errors["reset"]["count"] == 1 and "ServerDisconnected" in errors["reset"]["example"]


def test_latency_from_merged_histograms(result):
    rep = report.build_report(result)
    e2e = rep["latency_s"]["e2e"]
    everything = np.asarray(W0_E2E + W1_E2E)
    assert e2e["count"] == everything.size
    assert e2e["max"] == pytest.approx(everything.max())
    for q in (50, 90, 99):
        exact = float(np.percentile(everything, q, method="inverted_cdf"))
        assert exact * (1 - 1e-9) <= e2e[f"p{q}"] <= exact * 1.0101, q
    merged = Histogram.merged(Histogram.from_state(w.e2e_hist) for w in result.workers)
    assert e2e == merged.summary()
    submit = rep["latency_s"]["submit"]
    assert submit["count"] == 10  # every row was submitted, the pending one included
    assert submit["max"] == pytest.approx(0.010)


def test_router_server_target_cpu_blocks(result):
    rep = report.build_report(result)
    assert rep["router"]["peak_in_flight"] == 6 and rep["router"]["received"] == 10
    server = rep["server"]
    assert "log_tail" not in server
    assert (server["pid"], server["version"]) == (4242, "0.4.0")
    assert server["peak_fds"] == 50 and server["baseline_fds"] == 10 and server["drained_fds"] == 11
    assert server["peak_rss_bytes"] == 300_000_000 and server["baseline_rss_bytes"] == 100_000_000
    assert server["healthz_probes"] == 3 and server["healthz_failures"] == 1
    assert server["healthz_latency_s"]["p50"] == pytest.approx(0.002)
    assert server["healthz_latency_s"]["max"] == pytest.approx(0.5)
    assert server["samples"] == 3
    assert rep["target"] == {"spec": "skyrl==0.4.0", "version": "0.4.0", "family": "skyrl"}
    assert rep["config"]["shape"]["requests"] == REQUESTED
    assert rep["cpu_s"]["harness_s"] == pytest.approx(2.0)
    assert rep["cpu_s"]["harness_share"] == pytest.approx(0.5)
    assert rep["interrupted"] is False and rep["error"] is None


def test_report_is_plain_json_and_round_trips(result, tmp_path):
    """CI reads the JSON: no numpy scalars may hide in it (write_json's default=str would
    silently turn them into strings)."""
    rep = report.build_report(result)
    text = json.dumps(rep)  # no default=: raises on any non-JSON type
    path = tmp_path / "report.json"
    report.write_json(rep, path)
    assert json.loads(path.read_text()) == json.loads(text)


def test_render_text(result):
    result.interrupted = True
    result.error = "load worker 1 crashed: boom"
    rep = report.build_report(result)
    text = report.render_text(rep)
    assert "completed 7" in text
    assert "failed 2" in text and "not finished 3" in text
    assert "http_404" in text and "integrity" in text
    assert "peak 50" in text
    assert "failures 1/3" in text
    assert "INTERRUPTED" in text
    assert "load worker 1 crashed" in text
    assert rep["interrupted"] is True


def test_render_text_shows_the_collapse_chain_and_its_evidence(result):
    rep = report.build_report(result)
    rep["verdict"] = {
        "kind": "event_loop_stall",
        "at_s": 3.2,
        "evidence": ["healthz failed 7/10"],
        "consequences": [{"kind": "no_progress", "at_s": 5.0, "evidence": "nothing completed for 30s"}],
    }
    lines = report.render_text(rep).splitlines()
    i = lines.index("VERDICT: event_loop_stall at t=3s -> no_progress at t=5s")
    assert lines[i + 1 : i + 3] == ["  evidence: healthz failed 7/10", "  then: nothing completed for 30s"]
    assert any(line.startswith("accept queue peak ") for line in lines)


def test_render_text_names_the_switches(result):
    import dataclasses

    result.config = dataclasses.replace(result.config, regress=("retention",), fixes=("plain-tracebacks",))
    first = report.render_text(report.build_report(result)).splitlines()[0]
    assert first.endswith(", regress retention, fix plain-tracebacks")


def test_render_text_says_which_sampling_path_the_raw_client_does_not_model(result):
    """tinker 0.38 polls retrieve_futures per session where the server's client config turns it on; the raw client
    does not, so a report says so when the server turned it on or did not say, and nothing when it is off."""
    rep = report.build_report(result)
    shown = {}
    for advertised in (False, True, None):
        rep["server"]["retrieve_futures"] = advertised
        lines = report.render_text(rep).splitlines()
        shown[advertised] = next((line for line in lines if line.startswith("sampling path:")), None)
    assert shown[False] is None
    assert "client/config turns on tinker 0.38's per-session retrieve_futures polls" in shown[True]
    assert "did not answer whether it turns on" in shown[None]
    rep["client"] = {"kind": "sdk", "sdk": "tinker==0.38.0"}  # the real SDK follows the server's flag itself
    assert "sampling path:" not in report.render_text(rep)
    del rep["server"]["retrieve_futures"]  # a report written before the question was asked
    rep["client"] = {"kind": "raw", "sdk": None}
    assert "sampling path:" not in report.render_text(rep)


def test_report_of_a_trial_that_never_loaded():
    """A trial stopped before any worker reported: nothing completed, everything not finished."""
    config = TrialConfig(target="url=http://127.0.0.1:9", shape=LoadShape(requests=50))
    result = TrialResult(
        config=config,
        history=History.empty(0),
        workers=[],
        monitor=None,
        router_stats={},
        server={"spec": config.target},
        wall_s=0.5,
        load_s=0.0,
        cpu={},
        interrupted=True,
    )
    rep = report.build_report(result)
    assert (rep["completed"], rep["failed"], rep["not_finished"]) == (0, 0, 50)
    assert rep["latency_s"]["e2e"]["count"] == 0 and rep["latency_s"]["e2e"]["p50"] is None
    assert rep["throughput_per_s"] == 0.0
    assert rep["errors"] == {}
    json.dumps(rep)
    text = report.render_text(rep)
    assert "completed 0" in text and "INTERRUPTED" in text
    assert rep["target"]["family"] == "skyrl" and text.startswith(
        "target url=http://127.0.0.1:9 (version None; judged as skyrl)"
    )
    named = dataclasses.replace(result, config=dataclasses.replace(config, target="tuft+url=http://127.0.0.1:9"))
    named_rep = report.build_report(named)
    assert named_rep["target"]["family"] == "tuft"
    assert report.render_text(named_rep).startswith("target tuft+url=http://127.0.0.1:9 (version None)")


def test_crashed_worker_counts_as_not_finished(result):
    crashed = WorkerSummary(2, {}, {}, crashed="RuntimeError('boom')")
    result.workers.append(crashed)
    rep = report.build_report(result)
    assert rep["completed"] == 7
    assert rep["latency_s"]["e2e"]["count"] == len(W0_E2E) + len(W1_E2E)


def test_faults_say_their_direction(result):
    specs = ("edge:latency:latency=500,stream=both@0.5+2", "backend:reset_peer@1+1", "edge:down@0+0.5")
    result.fault_log = FaultLog(
        tuple(AppliedFault(i, parse_fault(spec), applied_at_s=0.5, removed_at_s=2.5) for i, spec in enumerate(specs))
    )
    rep = report.build_report(result)
    assert [f["streams"] for f in rep["faults"]["applied"]] == [["downstream", "upstream"], ["downstream"], []]
    assert [f["fault"]["stream"] for f in rep["faults"]["applied"]] == ["both", "downstream", "downstream"]
    lines = [line for line in report.render_text(rep).splitlines() if line.startswith("fault ")]
    assert [line.split(": ")[0] for line in lines] == [
        "fault edge:latency:jitter=0,latency=500,stream=both@0.5+2.0 (downstream + upstream)",
        "fault backend:reset_peer:timeout=0@1.0+1.0 (downstream)",
        "fault edge:down@0.0+0.5",
    ]


def test_report_names_what_each_process_fault_did(result):
    specs = ["server:pause@0.1+0.2", "server:restart@0.5", "router:pause@1+1", "edge:down@0+1"]
    result.fault_log = FaultLog(
        tuple(
            AppliedFault(i, parse_fault(s), applied_at_s=0.1 * (i + 1), removed_at_s=2.0) for i, s in enumerate(specs)
        ),
        None,
    )
    rep = report.build_report(result)
    effects = [f.get("effect") for f in rep["faults"]["applied"]]
    assert effects[3] is None and all(effects[:3])
    lines = report.render_text(rep).splitlines()
    restart = next(i for i, line in enumerate(lines) if line.startswith("fault server:restart@0.5"))
    assert "started again on its port" in lines[restart + 1]
    assert any("SIGSTOPped" in line and "router" in line for line in lines)


@pytest.mark.parametrize(
    ("impls", "client", "said"),
    [
        (["compiled", "compiled"], "raw", ", raw client (compiled)"),
        (["python", None], "raw", ", raw client (python)"),
        (["compiled", "python"], "raw", ", raw client (compiled+python)"),
        ([None, None], "sdk", ", through the tinker SDK (tinker==0.38.0)"),
    ],
)
def test_render_text_says_which_client_drove_the_load(result, impls, client, said):
    """The requests line names the client whose timings the summary shows: the compiled raw client, the Python
    one, or the tinker SDK with its release."""
    result.workers = [dataclasses.replace(w, client_impl=impl) for w, impl in zip(result.workers, impls)]
    shape = dataclasses.replace(result.config.shape, client=client, sdk="tinker==0.38.0" if client == "sdk" else "")
    result.config = dataclasses.replace(result.config, shape=shape)
    line = next(x for x in report.render_text(report.build_report(result)).splitlines() if x.startswith("requests "))
    assert line.endswith(said)
