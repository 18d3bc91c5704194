"""The detection matrix as one HTML file (``faultload matrix --html PATH``), from its ``faultload.matrix/1`` JSON.

Its rows, each with what it was expected to come out as and what it came out as (as the Markdown table
reads them: :func:`faultload.store.matrix_table.shown_result`), what caught it, its judged trials, its
repro and its log (links to the files), its wall time; then the rows x invariants grid
(:func:`faultload.store.html.tally_grid`): per cell caught (the row was caught by it), clean (judged by a
trial of the row and never caught), unknown (no trial judged it, some left it unknown: never shown clean),
skipped (its examples were not run) or — (no trial of the row asserted it), with its trials judged /
unknown / skipped. A comparison row judges metrics, not invariants: the metrics that caught it are columns
too, and its ratios are in its row's detail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from faultload.model.switches import switches_text
from faultload.store.html import counted, esc, facts, local_link, page, table, tally_grid, write_page
from faultload.store.matrix_table import shown_expectation, shown_result

WORDS = {"expected": "as expected", "unexpected": "NOT as expected", "error": "error", "skipped": "not run here"}


def write_matrix_html(matrix: Mapping[str, Any], path: str | Path) -> Path:
    """Write the matrix's page to ``path`` (whole or not at all); its path."""
    return write_page(matrix_page(matrix), path)


def matrix_page(matrix: Mapping[str, Any]) -> str:
    """The page, as text."""
    rows = matrix["rows"]
    states = [_state(r) for r in rows]
    counts = {state: states.count(state) for state in WORDS}
    title = f"faultload matrix: profile {matrix['profile']}: " + (
        "every row run as expected" if matrix["ok"] else "NOT every row as expected"
    )
    names = list(
        dict.fromkeys(
            [n for r in rows for n in (r.get("invariants") or {})] + [n for r in rows for n in r.get("caught_by") or ()]
        )
    )
    grid = (
        tally_grid(
            names, [(_row_anchor(r), _state(r), r.get("invariants") or {}, set(r.get("caught_by") or ())) for r in rows]
        )
        if names
        else '<p class="note">no row judged an invariant</p>'
    )
    body = [
        f"<h1>{esc(title)}</h1>",
        f'<p class="summary">{counted(counts, WORDS) or "no row"}</p>',
        facts(
            [
                ("profile", esc(matrix["profile"])),
                ("rows", esc(len(rows))),
                ("wall", esc(f"{matrix['wall_s'] / 60:.1f} min in all")),
                (
                    "session per row",
                    esc("the profile's" if matrix.get("session_s") is None else f"{matrix['session_s']:g} s"),
                ),
            ]
            + ([("logs", local_link(matrix["logs"]))] if matrix.get("logs") else [])
        ),
        "<h2>Rows</h2>",
        _rows_table(rows, matrix.get("logs")),
        "<h2>Invariants per row</h2>",
        '<p class="note">Each cell: caught (the row was caught by it), clean (judged by a trial of the row, never '
        "caught), unknown (no trial judged it, some left it unknown), skipped (its examples were not run), — (no "
        "trial of the row asserted it); under it the row's trials that judged it / left it unknown / skipped it.</p>",
        grid,
    ]
    return page(title, "\n".join(body), charts=False)


def _state(row: Mapping[str, Any]) -> str:
    if row["result"] == "skipped":
        return "skipped"
    return "expected" if row.get("as_expected") else "error" if row["result"] == "error" else "unexpected"


def _row_anchor(row: Mapping[str, Any]) -> str:
    return f'<a href="#row-{esc(row["row"])}">{esc(row["row"])}</a>'


def _rows_table(rows: list[Mapping[str, Any]], logs: str | None) -> str:
    cells = []
    for r in rows:
        repro = "-"
        if r.get("repro_requests") is not None:
            size = f"{r['repro_requests']} requests" + (
                f" + {r['repro_training_calls']} training calls" if r.get("repro_training_calls") else ""
            )
            repro = local_link(r.get("repro_path"), size) if r.get("repro_path") else esc(size)
        cells.append(
            (
                _state(r),
                [
                    f'<span id="row-{esc(r["row"])}">{esc(r["row"])}</span>',
                    esc(r["target"] + switches_text(r.get("regress") or (), r.get("fixes") or ())),
                    esc(shown_expectation(dict(r))),
                    f'<span class="state" data-result="{esc(r["result"])}">{esc(shown_result(dict(r)))}</span>',
                    esc(", ".join(r.get("caught_by") or ()) or "-"),
                    esc(f"{r.get('judged_trials', 0)} (min {r.get('min_judged_trials', 1)})"),
                    repro,
                    esc(f"{r['wall_s'] / 60:.1f} min"),
                    local_link(Path(logs) / f"{r['row']}.log", "log") if logs else "-",
                    esc(_detail(r)),
                ],
            )
        )
    return table(
        ("row", "build", "expected", "result", "caught by", "judged trials", "repro", "wall", "log", "detail"),
        cells,
        {5: "num", 7: "num", 9: "detail"},
    )


def _detail(row: Mapping[str, Any]) -> str:
    """What the row proves; the error; the repro's first violation; a comparison row's worse ratios."""
    parts = [row.get("why") or ""]
    if row.get("error"):
        parts.append(f"error: {row['error']}")
    if row.get("evidence"):
        parts.append(row["evidence"])
    worse = [p for p in row.get("properties") or () if p.get("worse")]
    if worse:
        parts.append("worse: " + ", ".join(f"{p['name']} ratio {_ratio(p)}" for p in worse))
    return " — ".join(p for p in parts if p)


def _ratio(metric: Mapping[str, Any]) -> str:
    if metric.get("unbounded"):
        return "∞"
    return "-" if metric.get("ratio") is None else f"{metric['ratio']:.3f}"
