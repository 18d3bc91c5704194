"""A suite session as one HTML file (``pytest faultload --faultload-html PATH``), from its summary JSON.

The session's summary (:func:`faultload.suite.summary.summary_dict`, ``--faultload-summary-json``) holds
all it shows. Per property: its outcome, its examples by what became of them (trials that judged an
invariant, trials that left every one unknown, examples a time bound did not run), its failing examples
and the invariants it violated; then the properties x invariants grid (:func:`faultload.store.html.tally_grid`,
each cell violated, clean, unknown — never clean —, skipped or —, with its judged / unknown / skipped
counts), the session's sums as its last row. For each failed property: the evidence of each violation,
its shrink path (the first failing trial's requests to the repro's, each reduction tried and whether it
still failed: ``reduce_steps``) and links to its repro JSON, its trial page and its bundle when they
were written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from faultload.model.switches import switches_text
from faultload.store.html import bar, counted, esc, facts, local_link, page, table, tally_grid, write_page

WORDS = {"failed": "failed", "error": "error", "passed": "passed", "skipped": "skipped", "unknown": "not reported"}


def write_suite_html(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Write the session's page to ``path`` (whole or not at all); its path."""
    return write_page(suite_page(summary), path)


def suite_page(summary: Mapping[str, Any]) -> str:
    """The page, as text."""
    props = summary.get("properties") or []
    outcomes = [p.get("outcome", "unknown") for p in props]
    counts = {state: outcomes.count(state) for state in WORDS}
    verdict = (
        "no property ran"
        if not props
        else f"{counts['failed'] + counts['error']} of {len(props)} failed"
        if counts["failed"] + counts["error"]
        else "every property passed"
    )
    build = summary["target"] + switches_text(summary.get("regress") or (), summary.get("fixes") or ())
    title = f"faultload suite: {build}: {verdict}"
    failed = [p for p in props if p.get("outcome") in ("failed", "error") or p.get("violated")]
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="summary">{counted(counts, WORDS) or "no property ran"}</p>',
        facts(_facts(summary)),
        "<h2>Properties</h2>",
        '<p class="note">Each property\'s examples: its trials that judged an invariant (green), those that left '
        "every invariant unknown (amber), the examples a time bound did not run (grey); a trial Hypothesis "
        "replayed counts once.</p>",
        _properties_table(props),
        "<h2>Invariants per property</h2>",
        '<p class="note">Each cell: violated (by the property\'s smallest failing trial), clean (judged by a '
        "trial, never violated there), unknown (no trial judged it, some left it unknown), skipped (its examples "
        "were not run), — (not asserted by the property); under it the trials that judged it / left it unknown / "
        "skipped it.</p>",
        _grid(summary, props),
        "<h2>Failures</h2>",
        "\n".join(_failure(p) for p in failed) if failed else '<p class="note">no property failed</p>',
    ]
    return page(title, "\n".join(body), charts=False)


def _facts(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    items = [
        ("profile", esc(summary["profile"])),
        ("target", esc(summary["target"] + switches_text(summary.get("regress") or (), summary.get("fixes") or ()))),
        (
            "trials",
            esc(
                f"{summary['trials']} run, {summary.get('judged_trials', 0)} judged (a trial once per "
                f"property that judged it), stack started {summary.get('stack_starts', 0)}x"
            ),
        ),
        ("wall", esc(f"{summary['wall_s']:.0f} s")),
    ]
    if summary.get("baseline"):
        items.insert(2, ("compared with", esc(summary["baseline"])))
    if summary.get("load_share") is not None:
        items.append(
            ("trial wall", esc(f"{summary['trial_wall_s']:.0f} s, {100 * summary['load_share']:.0f}% of it load"))
        )
    return items


def drawn(prop: Mapping[str, Any]) -> tuple[int, int, int]:
    """(trials that judged an invariant, trials that judged none, examples not run): each trial once, as the
    tallies count it (every invariant of a property is tallied by the same trials)."""
    tallies = (prop.get("invariants") or {}).values()
    trials = max((t["judged"] + t["unknown"] for t in tallies), default=0)
    judged = prop.get("judged_trials", 0)
    return judged, max(0, trials - judged), prop.get("not_run", 0)


def _properties_table(props: list[Mapping[str, Any]]) -> str:
    if not props:
        return '<p class="note">no property ran</p>'
    rows = []
    for p in props:
        judged, unjudged, not_run = drawn(p)
        name = f'<a href="#failure-{esc(p["name"])}">{esc(p["name"])}</a>' if _failed(p) else esc(p["name"])
        rows.append(
            (
                p.get("outcome", "unknown"),
                [
                    name,
                    f'<span class="state">{esc(WORDS.get(p.get("outcome", "unknown"), p.get("outcome")))}</span>',
                    bar(
                        [
                            ("judged", judged, "judged"),
                            ("unknown", unjudged, "all unknown"),
                            ("skipped", not_run, "not run"),
                        ]
                    ),
                    esc(f"{p.get('trials', 0)} / {p.get('cached', 0)}"),
                    esc(p.get("failing_examples", "-")),
                    esc(", ".join(p.get("violated") or ()) or "-"),
                    esc("; ".join(([p["error"]] if p.get("error") else []) + list(p.get("unjudged") or ())) or "-"),
                ],
            )
        )
    return table(
        ("property", "outcome", "examples", "trials run / cached", "failing examples", "violated", "detail"),
        rows,
        {3: "num", 4: "num", 6: "detail"},
    )


def _failed(prop: Mapping[str, Any]) -> bool:
    return prop.get("outcome") in ("failed", "error") or bool(prop.get("violated"))


def _grid(summary: Mapping[str, Any], props: list[Mapping[str, Any]]) -> str:
    names = list(
        dict.fromkeys(
            [n for p in props for n in (p.get("invariants") or {})]
            + [n for p in props for n in p.get("violated") or ()]
        )
    )
    if not names:
        return '<p class="note">no invariant asserted</p>'
    rows = [
        (esc(p["name"]), p.get("outcome", "unknown"), p.get("invariants") or {}, set(p.get("violated") or ()))
        for p in props
    ]
    rows.append(
        (
            "<strong>session</strong>",
            "",
            summary.get("invariants") or {},
            {n for p in props for n in p.get("violated") or ()},
        )
    )
    return tally_grid(names, rows, hit_word="violated")


def _failure(prop: Mapping[str, Any]) -> str:
    """A failed property: its violations' evidence, its shrink path, its repro's files."""
    evidence = prop.get("evidence") or {}
    items = [("outcome", esc(prop.get("outcome", "unknown")))]
    items += [(f"{name} violated", esc(evidence.get(name, "-"))) for name in prop.get("violated") or ()]
    if prop.get("error"):
        items.append(("error", esc(prop["error"])))
    if prop.get("first_failure_requests") is not None:
        items.append(("shrunk", esc(_shrink_text(prop))))
    repro = prop.get("repro_path")
    items += [
        ("repro", local_link(repro) + (f" — replay: <code>faultload replay {esc(repro)}</code>" if repro else "")),
        ("trial page", local_link(prop.get("html_path"))),
        (
            "bundle",
            local_link(prop.get("bundle_path"))
            + (f" — check: <code>faultload check {esc(prop['bundle_path'])}</code>" if prop.get("bundle_path") else ""),
        ),
    ]
    steps = prop.get("reduce_steps") or []
    parts = [f'<h3 id="failure-{esc(prop["name"])}">{esc(prop["name"])}</h3>', facts(items)]
    if steps:
        parts += [
            f'<p class="note">Shrink path: {esc(" → ".join(str(n) for n in shrink_path(prop)))} requests. '
            "Each reduction tried, in order (kept: it still failed, and the next ones start from it):</p>",
            _steps_table(steps),
        ]
    return "\n".join(parts)


def shrink_path(prop: Mapping[str, Any]) -> list[int]:
    """The requests from the first failing trial through each reduction kept to the repro's."""
    path = [prop["first_failure_requests"]]
    for step in prop.get("reduce_steps") or ():
        if step["still_fails"] and step["requests"] != path[-1]:
            path.append(step["requests"])
    if prop.get("repro_requests") is not None and prop["repro_requests"] != path[-1]:
        path.append(prop["repro_requests"])
    return path


def _shrink_text(prop: Mapping[str, Any]) -> str:
    text = f"{prop['first_failure_requests']} → {prop.get('repro_requests')} requests"
    if prop.get("failing_examples") is not None:
        text += f" over {prop['failing_examples']} failing examples"
    if prop.get("shrink_s") is not None:
        text += f" in {prop['shrink_s']:.0f} s"
    return text + (" (cut by the shrink budget)" if prop.get("shrink_cut") else "")


def _steps_table(steps: list[Mapping[str, Any]]) -> str:
    rows = [
        (
            "held" if s["still_fails"] else "skipped",
            [
                esc(i),
                esc(s["step"]),
                esc(s["requests"]),
                f'<span class="state">{"still fails: kept" if s["still_fails"] else "passed: not kept"}</span>',
                esc(f"{s['seconds']:.1f}"),
            ],
        )
        for i, s in enumerate(steps, 1)
    ]
    return table(("#", "reduction", "requests", "result", "seconds"), rows, {0: "num", 2: "num", 4: "num"})
