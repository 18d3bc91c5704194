"""What the side-by-side benchmarks share: one `faultload run` trial on its own fresh stack."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from faultload.cli.from_args import config_from_args  # noqa: E402
from faultload.cli.parser import build_parser as _parser  # noqa: E402
from faultload.host.workspace import Workspace  # noqa: E402
from faultload.run.stack import Stack  # noqa: E402


@contextmanager
def fresh_stack(run_args: list[str], workspace: Workspace) -> Iterator[tuple[Any, Stack]]:
    """(TrialConfig, started Stack) for ``faultload run RUN_ARGS --quiet``; the stack is closed after."""
    config = config_from_args(_parser().parse_args(["run", *run_args, "--quiet"]))
    stack = Stack(config.stack_config(), config.router, workspace).start()
    try:
        yield config, stack
    finally:
        errors = stack.close()
        if errors:
            print(f"  cleanup errors: {errors}", file=sys.stderr)


def checked(result: Any) -> Any:
    """The trial's result, or RuntimeError if the trial itself failed (not its invariants)."""
    if result.error:
        raise RuntimeError(f"trial failed: {result.error}")
    return result
