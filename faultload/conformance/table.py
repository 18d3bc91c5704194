"""The conformance table written out: JSON (``faultload.conformance/1``), Markdown and one self-contained HTML
page, each from the same :class:`~faultload.conformance.run.Conformance` value."""

from __future__ import annotations

import datetime as _dt
import html
import json
from pathlib import Path
from typing import Any

from faultload.conformance.run import BROKEN, KEPT, Conformance

SCHEMA = "faultload.conformance/1"
# How a cell reads in the table (the detail and the repro follow it, under the table).
MARKS = {KEPT: "kept", BROKEN: "**broken**"}


def to_dict(table: Conformance) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "targets": list(table.targets),
        "fixes": list(table.fixes),
        "time_scale": table.time_scale,
        "wall_s": round(table.wall_s, 1),
        "rules": [{"name": r.name, "asks": r.asks, "invariants": list(r.invariants)} for r in table.rules],
        "cells": [
            {
                "target": c.target,
                "rule": c.rule,
                "status": c.status,
                "detail": c.detail,
                "repro": c.repro,
                "wall_s": round(c.wall_s, 1),
            }
            for c in table.cells
        ],
    }


def markdown(table: Conformance) -> str:
    """The table (a row per rule, a column per target) and, under it, each cell that is not kept, with its detail
    and repro command."""
    head = "| rule | " + " | ".join(f"`{t}`" for t in table.targets) + " |"
    lines = [head, "|---|" + "---|" * len(table.targets)]
    notes = []
    for rule in table.rules:
        marks = []
        for target in table.targets:
            cell = table.cell(target, rule.name)
            if cell is None:
                marks.append("—")
                continue
            marks.append(MARKS.get(cell.status, cell.status))
            if cell.status != KEPT or rule.name == "cost_per_request":
                repro = f" Repro: `{cell.repro}`." if cell.repro else ""
                notes.append(f"- `{target}` {rule.name}: {cell.status}. {cell.detail}{repro}".rstrip())
        lines.append(f"| {rule.name}: {rule.asks} | " + " | ".join(marks) + " |")
    fixes = ", ".join(table.fixes) or "none"
    summary = f"Time scale {table.time_scale:g}, fixes given: {fixes}; {table.wall_s / 60:.1f} min in all."
    return "\n".join([summary, "", *lines, "", *notes]) + "\n"


def html_page(table: Conformance) -> str:
    """One page that opens offline: the same table, each cell's detail in its title and below."""
    esc = html.escape
    rows = []
    for rule in table.rules:
        cells = []
        for target in table.targets:
            cell = table.cell(target, rule.name)
            status = cell.status if cell else "—"
            title = esc(cell.detail + (f" — {cell.repro}" if cell and cell.repro else "")) if cell else ""
            cls = status.replace(" ", "-")
            cells.append(f'<td class="{cls}" title="{title}">{esc(status)}</td>')
        rows.append(f"<tr><th>{esc(rule.name)}<br><small>{esc(rule.asks)}</small></th>{''.join(cells)}</tr>")
    details = "".join(
        f"<li><code>{esc(c.target)}</code> {esc(c.rule)}: {esc(c.status)}. {esc(c.detail)}"
        + (f" <code>{esc(c.repro)}</code>" if c.repro else "")
        + "</li>"
        for c in table.cells
        if c.status != KEPT or c.rule == "cost_per_request"
    )
    heads = "".join(f"<th><code>{esc(t)}</code></th>" for t in table.targets)
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:.4em;text-align:left;vertical-align:top}.kept{background:#e6f4e6}.broken{background:#f8d7d7}"
        ".not-applicable{background:#eee}.not-judged,.harness-error{background:#fff3cd}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>faultload conformance</title><style>{style}</style>"
        f"</head><body><h1>Conformance</h1><p>{esc(markdown(table).splitlines()[0])}</p>"
        f"<table><tr><th>rule</th>{heads}</tr>{''.join(rows)}</table><ul>{details}</ul></body></html>\n"
    )


def write(table: Conformance, json_out: Path | None, markdown_out: Path | None, html_out: Path | None) -> None:
    if json_out:
        json_out.write_text(json.dumps(to_dict(table), indent=1) + "\n")
    if markdown_out:
        markdown_out.write_text(markdown(table))
    if html_out:
        html_out.write_text(html_page(table))
