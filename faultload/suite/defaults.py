"""Which profile a session runs: the one rule, imported by the cheap plugin and the session alike.

Kept apart from ``profiles`` (which imports the strategies' limits) so that the
plugin, loaded by every pytest run in the environment, stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_PROFILE = "ci"
PROFILE_VARIABLE = "FAULTLOAD_PROFILE"


def profile_name(option: str | None, environ: Mapping[str, str]) -> str:
    """``--faultload-profile``, else ``$FAULTLOAD_PROFILE``, else :data:`DEFAULT_PROFILE`."""
    return option or environ.get(PROFILE_VARIABLE) or DEFAULT_PROFILE
