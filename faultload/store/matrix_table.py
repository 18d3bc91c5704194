"""The detection matrix as the README shows it (``faultload matrix --markdown-out``), from its JSON alone."""

from __future__ import annotations

from typing import Any


def markdown_table(matrix: dict[str, Any]) -> str:
    """The matrix as the README shows it: the rows, then how many trials judged each invariant."""
    not_run = [r["row"] for r in matrix["rows"] if r["result"] == "skipped"]
    lines = [
        f"Profile `{matrix['profile']}`, {matrix['wall_s'] / 60:.1f} min in all "
        f"({'every row run as expected' if matrix['ok'] else 'NOT every row as expected'}"
        + (f"; not run on this profile: {', '.join(not_run)}" if not_run else "")
        + ").",
        "",
        "| row | target | regress | fix | expected | result | caught by | judged trials | repro (requests) | wall |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in matrix["rows"]:
        shown = shown_result(r)
        result = shown if r.get("as_expected") else f"**{shown}**"
        expected = shown_expectation(r)
        lines.append(
            f"| {r['row']} | `{r['target']}` | {', '.join(r['regress']) or '—'} | "
            f"{', '.join(r.get('fixes', [])) or '—'} | {expected} | {result} | "
            f"{', '.join(r['caught_by']) or '—'} | {r.get('judged_trials', 0)} (min {r.get('min_judged_trials', 1)}) | "
            f"{r['repro_requests'] if r['repro_requests'] is not None else '—'} | {r['wall_s'] / 60:.1f} min |"
        )
    names = list(dict.fromkeys(n for r in matrix["rows"] for n in (r.get("invariants") or {})))
    if names:
        lines += [
            "",
            "Trials per invariant, judged / unknown / skipped (**0 judged**: the row did not judge it):",
            "",
            "| row | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for r in matrix["rows"]:
            cells = []
            for n in names:
                t = (r.get("invariants") or {}).get(n)
                if t is None:
                    cells.append("—")
                    continue
                judged = f"**{t['judged']}**" if t["judged"] == 0 else str(t["judged"])
                cells.append(f"{judged} / {t['unknown']} / {t['skipped']}")
            lines.append(f"| {r['row']} | " + " | ".join(cells) + " |")
        unjudged = [
            (r["row"], n) for r in matrix["rows"] for n, t in (r.get("invariants") or {}).items() if t["judged"] == 0
        ]
        if unjudged:
            lines += ["", "Not judged: " + "; ".join(f"{row}: {n}" for row, n in unjudged) + "."]
    return "\n".join(lines) + "\n"


def shown_result(row: dict[str, Any]) -> str:
    """``caught (unexpected: ...)``, ``error: not judged``, or the plain result."""
    if row.get("unexpected"):
        return f"caught (unexpected: {', '.join(row['caught_by'])})"
    if row["result"] == "error" and (row.get("error") or "").startswith("not judged"):
        return "error: not judged"
    if row["result"] == "skipped":
        return "skipped (not run on this profile)"
    return row["result"]


def shown_expectation(row: dict[str, Any]) -> str:
    """``caught by a / b``, ``clean`` or ``not run``: what the row must come out as."""
    if row["expected"] == "skipped":
        return "not run"
    return row["expected"] + (f" by {' / '.join(row['expected_caught_by'])}" if row.get("expected_caught_by") else "")
