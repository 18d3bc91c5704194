"""One build to compare: a target plus its switches, parsed from one string.

``skyrl==0.4.0``, ``skyrl==0.4.0+regress=rich-access-log``,
``skyrl@PATH+fix=plain-tracebacks``, ``skyrl==0.4.0+regress=a,b+fix=c``: the
target spec of :mod:`faultload.model.target`, then ``+regress=`` and ``+fix=``
with the switch names of :mod:`faultload.model.switches`. ``faultload compare``
and the suite's ``--faultload-baseline`` take it; a repro names both builds by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultload.model.switches import unknown_switch
from faultload.model.target import parse_target

_SWITCH = re.compile(r"\+(regress|fix)=")


@dataclass(frozen=True)
class Build:
    target: str
    regress: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The spec this build parses from, switches in a fixed order (two spellings of one build compare equal)."""
        return (
            self.target
            + (f"+regress={','.join(self.regress)}" if self.regress else "")
            + (f"+fix={','.join(self.fixes)}" if self.fixes else "")
        )


def parse_build(text: str, what: str = "build") -> Build:
    """Parse a build spec; ValueError with one line naming what is wrong (``what``: the option, for that line)."""
    text = text.strip()
    parts = _SWITCH.split(text)
    target = parts[0]
    switches: dict[str, list[str]] = {"regress": [], "fix": []}
    if not target:
        raise ValueError(f"{what} {text!r}: no target before the switches")
    try:
        spec = parse_target(target)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    for kind, names in zip(parts[1::2], parts[2::2]):
        listed = [n.strip() for n in names.split(",")]
        if not all(listed):
            raise ValueError(f"{what} {text!r}: +{kind}= needs switch names, comma-separated")
        switches[kind] += listed
    regress, fixes = tuple(sorted(set(switches["regress"]))), tuple(sorted(set(switches["fix"])))
    wrong = unknown_switch(regress, fixes)
    if wrong:
        raise ValueError(f"{what} {text!r}: {wrong}")
    if spec.kind == "url" and (regress or fixes):
        raise ValueError(f"{what} {text!r}: switches need a target faultload launches (skyrl==X.Y.Z or skyrl@PATH)")
    return Build(spec.text, regress, fixes)
