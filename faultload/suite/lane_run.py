"""The controller of a session of lanes: what its lanes reported, as one session's summary, lines and exit.

The pytest process the user started hands the properties to its lanes (pytest-xdist workers,
:mod:`faultload.suite.lanes`) and runs no trial itself. Each lane reports when it ends: its session summary,
its terminal lines and what its trials took of the machine. This merges them into the one summary
``--faultload-summary-json`` and ``--faultload-html`` write, the lines the terminal shows, the outcomes the
exit code reads, and records the lanes' measured needs for the next session's count.
"""

from __future__ import annotations

import time
from typing import Any

from faultload.host.lanes import Lanes, write_needs
from faultload.host.workspace import Workspace
from faultload.suite.lanes import merge_summaries, needs_of
from faultload.suite.options import ReportFiles
from faultload.suite.summary import write_summary


class LaneRun:
    """One session's lanes, as the controller knows them."""

    def __init__(self, lanes: Lanes | None, workers: int, workspace: Workspace, started: float) -> None:
        self.lanes = lanes  # as the plugin chose them; None when pytest-xdist's -n set the count
        self.workers = workers
        self.workspace = workspace
        self.started = started  # time.monotonic() when the session started
        self.reports: dict[str, dict[str, Any]] = {}  # lane -> what it reported when it ended
        self.lost: dict[str, str] = {}  # lane -> why it ended without a report (it crashed)

    def add(self, lane: str, report: dict[str, Any] | None, error: object) -> None:
        if report is not None:
            self.reports[lane] = report
        else:
            self.lost[lane] = str(error or "ended without a report")

    def outcomes(self) -> dict[str, str]:
        """Each property's outcome as its lane saw it; a lane lost without a report is the harness's error."""
        found = {
            prop["nodeid"]: prop.get("outcome", "unknown")
            for report in self.reports.values()
            for prop in report["summary"].get("properties", [])
        }
        found.update({f"lane {lane}": "error" for lane in self.lost})
        return found

    def summary(self) -> dict[str, Any]:
        """The session's summary: its lanes' merged, and what each lane was."""
        lanes = {
            "count": self.lanes.count if self.lanes is not None else self.workers,
            "reason": self.reason(),
            "by_lane": {
                lane: {
                    "properties": [p["nodeid"] for p in report["summary"].get("properties", [])],
                    "usage": report.get("usage"),
                }
                for lane, report in sorted(self.reports.items())
            },
            "lost": dict(self.lost),
        }
        parts = [report["summary"] for _, report in sorted(self.reports.items())]
        return merge_summaries(parts, time.monotonic() - self.started, lanes)

    def reason(self) -> str:
        return self.lanes.reason() if self.lanes is not None else f"{self.workers} lane(s), as pytest-xdist's -n set"

    def summary_lines(self) -> list[str]:
        """The terminal's faultload section: the lanes and why that many, then each lane's own lines."""
        if not self.reports and not self.lost:
            return []
        lines = [f"{self.reason()}; the session took {time.monotonic() - self.started:.0f}s"]
        for lane, report in sorted(self.reports.items()):
            lines += [f"[{lane}] {line}" for line in report.get("lines", [])]
        lines += [f"[{lane}] ERROR: the lane ended without its report: {why}" for lane, why in self.lost.items()]
        return lines

    def finish(self, files: ReportFiles) -> None:
        """Write the merged summary (JSON, page, Markdown) when asked, and the lanes' measured needs always."""
        if files.wanted:
            write_summary(self.summary(), files)
        needs = needs_of([r["usage"] for r in self.reports.values() if r.get("usage")])
        if needs is not None:
            write_needs(self.workspace.root, needs)
