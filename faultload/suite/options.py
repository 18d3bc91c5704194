"""The suite's pytest options by group: what is tested, how the session runs, what reaches outside it.

Kept apart from the plugin (which every pytest run in the environment loads) so that each module stays small;
like the plugin it imports plain values only, never the machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from faultload.model.switches import FIXES, REGRESSIONS
from faultload.model.target import DEFAULT_TARGET, TARGET_FORMS
from faultload.suite.defaults import DEFAULT_PROFILE


def add_build_options(group: pytest.OptionGroup) -> None:
    """What the session tests: the target, the switches built into it, the SDK its real-SDK trials run."""
    group.addoption(
        "--faultload-target",
        default=None,
        metavar="SPEC",
        help=f"server under test: {' | '.join(TARGET_FORMS)} (default {DEFAULT_TARGET})",
    )
    group.addoption(
        "--faultload-regress",
        action="append",
        default=[],
        metavar="NAME",
        help="undo a known fix, or add a catalogued bug, in the launched server: "
        f"{', '.join(REGRESSIONS)} (repeatable; default none)",
    )
    group.addoption(
        "--faultload-fix",
        action="append",
        default=[],
        metavar="NAME",
        help=f"apply a candidate fix in the launched server: {', '.join(FIXES)} (repeatable; default none)",
    )
    group.addoption(
        "--faultload-sdk",
        default=None,
        metavar="tinker==X.Y.Z",
        help="the SDK release the session's real-SDK trials run, installed into a folder of its own "
        "when missing (default: the tinker installed beside faultload)",
    )


def add_session_options(group: pytest.OptionGroup) -> None:
    """How much the session runs (its profile, and the profile's bounds overridden) and what it leaves."""
    group.addoption(
        "--faultload-profile",
        default=None,
        choices=("ci", "nightly", "confirm"),
        help="ci: small derandomized examples, every one run (<= 12 min); nightly: more/larger (<= 60 min), "
        "example database kept; confirm: the 131,072-request shape once "
        f"(default {DEFAULT_PROFILE}, or $FAULTLOAD_PROFILE)",
    )
    group.addoption(
        "--faultload-workdir",
        default=None,
        metavar="DIR",
        help="faultload's folder (default .faultload or $FAULTLOAD_HOME)",
    )
    group.addoption(
        "--faultload-shrink-s",
        default=None,
        type=float,
        metavar="S",
        help="stop shrinking a failure after S seconds (default: the profile's)",
    )
    group.addoption(
        "--faultload-examples",
        default=None,
        type=int,
        metavar="N",
        help="examples per property (default: the profile's)",
    )
    group.addoption(
        "--faultload-session-s",
        default=None,
        type=float,
        metavar="S",
        help="start no trial after S seconds of the session (default: the profile's); "
        "properties left without a judged trial then fail as not judged",
    )
    group.addoption(
        "--faultload-lanes",
        default="auto",
        metavar="N|auto",
        help="properties side by side, each on a lane of its own (a pytest-xdist worker with its own stack); "
        "auto: as many as this machine's cores, memory and open files hold for the trials' measured needs; 1: "
        "one after another (default auto; an explicit -n wins)",
    )


def add_report_options(group: pytest.OptionGroup) -> None:
    """Where the session writes its summary: JSON, Markdown, a page."""
    group.addoption(
        "--faultload-summary-json",
        default=None,
        metavar="FILE",
        help="write each property's outcome, violated invariants and repro as JSON (default: not written)",
    )
    group.addoption(
        "--faultload-markdown",
        default=None,
        metavar="FILE",
        help="write the session as Markdown, what a pull request's job summary shows: each property, the "
        "violations new, known and fixed beside a base, the comparisons, each repro's replay command "
        "(default: not written)",
    )
    group.addoption(
        "--faultload-html",
        default=None,
        metavar="FILE",
        help="write the session as one self-contained HTML file that opens offline: each property's "
        "trials against their verdicts, a failed one's shrink path and repro (default: not written)",
    )


def add_outside_options(group: pytest.OptionGroup) -> None:
    """What the session reaches beyond its stack: a Ray cluster, a baseline build, a url= target."""
    group.addoption(
        "--faultload-ray",
        default=None,
        metavar="HOST:PORT",
        help="run each trial's load workers as actors on the Ray cluster there (auto: $RAY_ADDRESS; "
        "needs faultload[ray]); the stack stays here (default: local worker processes)",
    )
    group.addoption(
        "--faultload-baseline",
        default=None,
        metavar="BUILD",
        help="run the comparative property: each example on BUILD (e.g. skyrl==0.4.0, "
        "skyrl==0.4.0+regress=rich-access-log) and on the target, failing when the target is worse "
        "by [tool.faultload.compare]'s thresholds (default: a skyrl@PATH target on the ci profile "
        "is compared with its own release when that is installed, any other session skips the "
        "property; none: never compare)",
    )
    group.addoption(
        "--faultload-base",
        default=None,
        metavar="TARGET",
        help="judge what a pull request changed: run every example on TARGET too (the base commit's "
        "checkout, e.g. skyrl@../base, installed by faultload setup --target), fail only on violations "
        "the base does not show on the same example (new), list those it shows too (known) or alone "
        "(fixed), and compare with it when no --faultload-baseline is given (default: none: every "
        "violation fails)",
    )
    group.addoption(
        "--faultload-api-key",
        default=None,
        metavar="KEY",
        help="a url= target's API key (X-API-Key), never printed or written (default: $TINKER_API_KEY, "
        "else faultload's own)",
    )
    group.addoption(
        "--faultload-header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="an extra request header for a url= target (repeatable; default none)",
    )
    group.addoption(
        "--faultload-ca-cert",
        default=None,
        metavar="PEM",
        help="an https url= target's CA certificates to trust (default: the system's; the suite's "
        "sdk-client trials always check certificates, so there is no --faultload-insecure)",
    )


@dataclass(frozen=True)
class ReportFiles:
    """Where a session writes its summary: as JSON, as a page, as Markdown (a job summary); None: not written."""

    summary_json: Path | None = None
    html: Path | None = None
    markdown: Path | None = None

    @property
    def wanted(self) -> bool:
        return any(path is not None for path in (self.summary_json, self.html, self.markdown))


def report_files(config: pytest.Config, html: Path | None) -> ReportFiles:
    """Where the session writes its summary (``--faultload-summary-json``, ``--faultload-markdown``, and ``html``:
    ``--faultload-html`` once its folder was found writable)."""
    summary_json, markdown = (config.getoption(name, None) for name in ("faultload_summary_json", "faultload_markdown"))
    return ReportFiles(Path(summary_json) if summary_json else None, html, Path(markdown) if markdown else None)
