"""A suite session as Markdown (``--faultload-markdown``): what a pull request's job summary shows.

Read from the session's summary JSON (:func:`faultload.suite.summary.summary_dict`, merged over its lanes), so
the page and the JSON never disagree: each property's outcome and judged trials; with a base, the violations
new to the head (they fail the job), known (the base shows them too) and fixed (the base only), each with its
smallest example's requests; the comparisons; each repro's replay command.
"""

from __future__ import annotations

from typing import Any

FAILED = ("failed", "error")
DETAIL_CHARS = 300


def summary_markdown(data: dict[str, Any]) -> str:
    """The session's job summary as one Markdown document."""
    props = data.get("properties") or []
    lines = [f"## faultload: {_verdict(props)}", "", _context(data), ""]
    lines += _table(props, gated=bool(data.get("base")))
    lines += _new(props)
    for kind, title in (("known", "Known (the base shows them too; not failed)"), ("fixed", "Fixed (the base only)")):
        lines += _by_invariant(props, kind, title)
    lines += _comparisons(props)
    lines += _repros(props)
    return "\n".join(lines).rstrip() + "\n"


def _verdict(props: list[dict[str, Any]]) -> str:
    failed = [p["name"] for p in props if p.get("outcome") == "failed"]
    errors = [p["name"] for p in props if p.get("outcome") == "error"]
    if errors:
        return f"harness error in {', '.join(errors)} (not the server's verdict)"
    if failed:
        return f"failed: {', '.join(failed)}"
    return "passed" if props else "no property ran"


def _context(data: dict[str, Any]) -> str:
    target = f"`{data.get('target')}`"
    base = f" beside its base `{data['base']}`" if data.get("base") else ""
    baseline = f", compared with `{data['baseline']}`" if data.get("baseline") else ""
    return (
        f"Target {target}{base}{baseline}; profile {data.get('profile')}; {data.get('trials', 0)} trials, "
        f"{data.get('judged_trials', 0)} judged, in {data.get('wall_s', 0):.0f} s."
    )


def _count(prop: dict[str, Any], kind: str) -> str:
    seen = (prop.get("gate") or {}).get(kind) or {}
    return ", ".join(f"{name} ({s['examples']})" for name, s in sorted(seen.items())) or "—"


def _table(props: list[dict[str, Any]], gated: bool) -> list[str]:
    head = "| property | outcome | trials | judged |" + (" new | known | fixed |" if gated else "")
    lines = [head, "|---|---|---:|---:|" + ("---|---|---|" if gated else "")]
    for p in props:
        row = f"| {p['name']} | {p.get('outcome')} | {p.get('trials', 0)} | {p.get('judged_trials', 0)} |"
        if gated:
            row += f" {_count(p, 'new')} | {_count(p, 'known')} | {_count(p, 'fixed')} |"
        lines.append(row)
    return lines + [""]


def _new(props: list[dict[str, Any]]) -> list[str]:
    """The violations that failed: each failed property's invariants with their evidence and its repro's size."""
    failing = [p for p in props if p.get("outcome") in FAILED and (p.get("violated") or p.get("error"))]
    lines: list[str] = []
    for p in failing:
        if p.get("error") and not p.get("violated"):
            lines.append(f"- **{p['name']}**: error: {_cut(p['error'])}")
            continue
        size = f" (its smallest failing example: {p['repro_requests']} requests)" if p.get("repro_requests") else ""
        lines.append(f"- **{p['name']}**{size}:")
        for name in p["violated"]:
            lines.append(f"  - `{name}`: {_cut((p.get('evidence') or {}).get(name, ''))}")
    return _section("What failed", lines)


def _by_invariant(props: list[dict[str, Any]], kind: str, title: str) -> list[str]:
    """Known or fixed violations: per invariant, the examples and properties that showed them, the smallest."""
    by_name: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for p in props:
        for name, seen in ((p.get("gate") or {}).get(kind) or {}).items():
            by_name.setdefault(name, []).append((p["name"], seen))
    lines = []
    for name, where in sorted(by_name.items()):
        examples = sum(s["examples"] for _, s in where)
        smallest = min(s["requests"] for _, s in where if s.get("requests") is not None)
        props_text = ", ".join(prop for prop, _ in where)
        lines.append(f"- `{name}` in {examples} examples (the smallest {smallest} requests): {props_text}")
    return _section(title, lines)


def _comparisons(props: list[dict[str, Any]]) -> list[str]:
    lines = []
    for p in (p for p in props if p.get("comparative")):
        evidence = (p.get("evidence") or {}).values()
        said = "; ".join(_cut(e) for e in evidence) if evidence else "no metric worse past its threshold"
        lines.append(f"- **{p['name']}** ({p.get('trials', 0)} trials): {p.get('outcome')}: {said}")
    return _section("Comparisons", lines)


def _repros(props: list[dict[str, Any]]) -> list[str]:
    return _section(
        "Repros", [f"- {p['name']}: `faultload replay {p['repro_path']}`" for p in props if p.get("repro_path")]
    )


def _section(title: str, items: list[str]) -> list[str]:
    """A titled list, or nothing when it has no item."""
    return [f"### {title}", "", *items, ""] if items else []


def _cut(text: str) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"
