"""JUnit XML (``--junit-xml PATH``): what ``run``, ``confirm``, ``matrix`` and ``compare`` judged, as CI test reports.

One rule throughout: nothing that was not judged is a pass. A violated
invariant is a ``<failure>`` (its detail line the message), an unknown one
(``Verdict.ok`` None: its checker crashed, or the trial gave it too little to
judge) ``<skipped>`` with its reason, and a trial the harness could not finish
(its ``error``, an interrupt) an ``<error>``.

Each command builds its :class:`Suite` from the plain data it already writes
as JSON — a trial's report (:func:`trial_suite`), the ``faultload.matrix/1``
result (:func:`matrix_suite`), the ``faultload.compare/1`` result
(``compare.report.junit_suite``, where a comparison's numbers are formatted) —
so this module imports no matrix or comparison code.

Written with the standard library's ElementTree, not junitparser: it is a few
elements and four tallies, not worth a run-time dependency of every install;
the tests read the files back with junitparser (the ``test`` extra), a parser
that is not this one. The text is ASCII (anything else as character
references), so it is the same bytes under any locale, and it is written whole
or not at all (:func:`faultload.store.bundle.write_text_atomic`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultload.store.bundle import write_text_atomic
from faultload.store.matrix_table import shown_expectation, shown_result

OUTCOMES = ("passed", "failure", "error", "skipped")
# Verdict.ok -> (outcome, the message when the verdict's detail is empty)
_VERDICT_OUTCOMES = {True: ("passed", ""), False: ("failure", "violated"), None: ("skipped", "unknown")}
# characters XML 1.0 cannot hold at all (a server's message may carry one): written as U+FFFD
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Case:
    """One ``<testcase>``: ``outcome`` one of :data:`OUTCOMES`, ``message`` what failed / why it was skipped."""

    classname: str
    name: str
    outcome: str = "passed"
    message: str = ""
    time_s: float | None = None


@dataclass(frozen=True)
class Suite:
    name: str
    cases: Sequence[Case]
    properties: Mapping[str, Any] = field(default_factory=dict)
    time_s: float | None = None


def write_junit(suites: Sequence[Suite], path: str | Path) -> Path:
    """``<testsuites>`` of ``suites`` at ``path``, written atomically."""
    root = ET.Element("testsuites")
    for suite in suites:
        root.append(_suite_element(suite))
    _tally(
        root, [case for suite in suites for case in suite.cases], sum(s.time_s for s in suites if s.time_s is not None)
    )
    ET.indent(root)
    text = ET.tostring(root, encoding="us-ascii").decode("ascii")
    path = Path(path)
    write_text_atomic(path, '<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n")
    return path


def _suite_element(suite: Suite) -> ET.Element:
    element = ET.Element("testsuite", name=suite.name)
    _tally(element, suite.cases, suite.time_s)
    if suite.properties:
        properties = ET.SubElement(element, "properties")
        for name, value in suite.properties.items():
            ET.SubElement(properties, "property", name=name, value=_text(value))
    for case in suite.cases:
        if case.outcome not in OUTCOMES:
            raise ValueError(f"{case.classname}.{case.name}: outcome {case.outcome!r} is not one of {OUTCOMES}")
        attributes = {"classname": case.classname, "name": case.name}
        if case.time_s is not None:
            attributes["time"] = f"{case.time_s:.3f}"
        testcase = ET.SubElement(element, "testcase", attributes)
        if case.outcome != "passed":
            ET.SubElement(testcase, case.outcome, message=_text(case.message)).text = _text(case.message)
    return element


def _tally(element: ET.Element, cases: Sequence[Case], time_s: float | None) -> None:
    element.set("tests", str(len(cases)))
    for outcome, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        element.set(attribute, str(sum(case.outcome == outcome for case in cases)))
    if time_s is not None:
        element.set("time", f"{time_s:.3f}")


def _text(value: Any) -> str:
    return _NOT_XML.sub("\ufffd", value if isinstance(value, str) else str(value))


def trial_suite(report: Mapping[str, Any], command: str = "run") -> Suite:
    """A trial's JSON report (``store.report.build_report``) as a suite: the trial itself, then one case per
    invariant verdict (held: passed; violated: failure; unknown: skipped)."""
    classname = f"faultload.{command}"
    cases = [_trial_case(report, classname)]
    for verdict in report.get("invariants") or ():
        outcome, unsaid = _VERDICT_OUTCOMES[verdict["ok"]]
        cases.append(Case(classname, verdict["name"], outcome, "" if verdict["ok"] else verdict["detail"] or unsaid))
    config, target = report.get("config") or {}, report.get("target") or {}
    properties = {
        "target": target.get("spec", config.get("target", "")),
        "target_version": target.get("version") or "unknown",
        "regress": ",".join(config.get("regress") or ()),
        "fixes": ",".join(config.get("fixes") or ()),
        "requests": report.get("requested", ""),
    }
    return Suite(classname, cases, properties, report.get("wall_s"))


def _trial_case(report: Mapping[str, Any], classname: str) -> Case:
    """The trial as one case: an error when the harness could not finish it, a failure when requests
    did not complete (the run's exit code is 1 then, whatever the invariants said)."""
    wall_s = report.get("wall_s")
    if report.get("error"):
        return Case(classname, "trial", "error", f"harness error: {report['error']}", wall_s)
    if report.get("interrupted"):
        return Case(classname, "trial", "error", "interrupted: the load was stopped before it finished", wall_s)
    requested, completed = report.get("requested", 0), report.get("completed", 0)
    if completed < requested:
        return Case(
            classname,
            "trial",
            "failure",
            f"{completed} of {requested} requests completed ({report.get('failed', 0)} failed, "
            f"{report.get('not_finished', 0)} not finished)",
            wall_s,
        )
    return Case(classname, "trial", time_s=wall_s)


def matrix_suite(result: Mapping[str, Any]) -> Suite:
    """The ``faultload.matrix/1`` result as a suite: per row, one case for its outcome against its
    expectation, then one per invariant (a comparison row: per metric) the row has.

    A row that came out ``error`` — including ``error: not judged``, a session that judged too few
    trials — is an ``<error>``, not ``<skipped>``: nobody chose to leave the row out, the matrix could
    not tell whether the build is caught or clean, and ``faultload matrix`` exits 3 for it; a skip
    would show a CI report green beside a failed command. ``<skipped>`` is kept for a row whose own
    expectation on the profile is that it is not run there (its reason the message).
    """
    cases: list[Case] = []
    for row in result["rows"]:
        cases.append(_row_case(row))
        classname = f"faultload.matrix.{row['row']}"
        for name, state, note in _row_invariants(row):
            cases.append(Case(classname, name, *_invariant_outcome(row, name, state, note)))
    session_s = result.get("session_s")
    properties = {
        "schema": result.get("schema", ""),
        "profile": result.get("profile", ""),
        "session_s": "the profile's" if session_s is None else session_s,
        "logs": result.get("logs", ""),
    }
    return Suite("faultload.matrix", cases, properties, result.get("wall_s"))


def _row_case(row: Mapping[str, Any]) -> Case:
    wall_s = row.get("wall_s")
    if row["result"] == "skipped":
        return Case("faultload.matrix", row["row"], "skipped", row.get("why") or "not run on this profile")
    if row.get("as_expected"):
        return Case("faultload.matrix", row["row"], time_s=wall_s)
    if row["result"] == "error":
        got, outcome = f"error: {row.get('error') or 'no reason given'}", "error"
    else:
        got, outcome = shown_result(row), "failure"
    return Case("faultload.matrix", row["row"], outcome, f"expected {shown_expectation(row)}, got {got}", wall_s)


def _row_invariants(row: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(name, violated | held | unjudged, note) for each invariant of a row, or each metric of a comparison row."""
    metrics = [p for p in row.get("properties") or () if "worse" in p]  # a comparison row's metrics
    if metrics:
        return [_metric_state(metric) for metric in metrics]
    caught_by, tallies = row.get("caught_by") or (), row.get("invariants") or {}
    out = []
    for name in dict.fromkeys([*tallies, *caught_by, *(row.get("expected_caught_by") or ())]):
        tally = tallies.get(name)
        if name in caught_by:
            out.append((name, "violated", f"repro: {row.get('repro_path') or 'none kept'}"))
        elif tally and tally["judged"] > 0:
            out.append((name, "held", f"held in {tally['judged']} judged trials"))
        elif tally:
            out.append(
                (
                    name,
                    "unjudged",
                    f"not judged: 0 judged, {tally['unknown']} unknown, {tally['skipped']} skipped trials",
                )
            )
        else:
            out.append((name, "unjudged", "not judged: no trial of the row judged it"))
    return out


def _metric_state(metric: Mapping[str, Any]) -> tuple[str, str, str]:
    """A comparison row's metric as (name, state, note): unknown when a side did not measure it."""
    ratio = "unbounded" if metric.get("unbounded") else metric["ratio"]
    if ratio is None:
        return metric["name"], "unjudged", "not judged: a side did not measure it"
    ratio = ratio if isinstance(ratio, str) else f"{ratio:.3f}"
    return (
        metric["name"],
        "violated" if metric["worse"] else "held",
        f"ratio {ratio}, interval {metric['ci']}, threshold {metric['threshold']}",
    )


def _invariant_outcome(row: Mapping[str, Any], name: str, state: str, note: str) -> tuple[str, str]:
    """(outcome, message) of one invariant of a row: a failure only where this invariant is why the row
    is not as expected (the row's own case says so in any event)."""
    expected_by = row.get("expected_caught_by") or ()
    if state == "unjudged":
        return "skipped", note
    if state == "violated":
        if row["expected"] == "clean":
            return "failure", f"violated on a row expected clean ({note})"
        if row.get("unexpected"):
            return "failure", f"caught the row, but none of {', '.join(expected_by)} did ({note})"
        return "passed", ""
    if row["expected"] == "caught" and row["result"] == "clean" and name in expected_by:
        return "failure", f"expected to catch the row, but {note}"
    return "passed", ""
