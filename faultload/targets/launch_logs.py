"""What every family's launcher does alike inside the target's Python: name the release it runs
(:func:`installed_version`, the launch log's ``faultload-launch: version`` line), fail a missing patch point in one line
(exit 3, the harness's code: the release is not what faultload patches, which is not the server's verdict), and
give uvicorn's and Python logging's lines the timestamp ``faultload.record.serverlog`` reads
(``asctime - level - logger: message``, as SkyRL writes): a line the checker cannot place in the trial cannot be
told apart from a fault's.

Standard library and uvicorn only: imported by the launchers' patches, beside them.
"""

from __future__ import annotations

import logging
import sys
import typing
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version

import uvicorn.config

LAUNCH_ERROR_EXIT = 3
LOG_FORMAT = "%(asctime)s - %(levelname)s - %(name)s: %(message)s"
ACCESS_FORMAT = '%(asctime)s - %(levelname)s - %(name)s: %(client_addr)s - "%(request_line)s" %(status_code)s'


def fail(message: str) -> typing.NoReturn:
    print(f"faultload-launch: {message}", file=sys.stderr, flush=True)
    sys.exit(LAUNCH_ERROR_EXIT)


def timestamp_logs() -> None:
    """Timestamps on every line: the root logger's (a server's own basicConfig then finds it set) and uvicorn's."""
    logging.basicConfig(format=LOG_FORMAT, level=logging.INFO)
    formatters = uvicorn.config.LOGGING_CONFIG.get("formatters", {})
    if "default" not in formatters or "access" not in formatters:
        fail("uvicorn.config.LOGGING_CONFIG has no default and access formatters to give timestamps")
    formatters["default"]["fmt"] = LOG_FORMAT
    formatters["access"]["fmt"] = ACCESS_FORMAT


def installed_version(package: str) -> str:
    """The installed release of ``package`` (a checkout installed editable has one too), or "unknown"."""
    try:
        return package_version(package)
    except PackageNotFoundError:
        return "unknown"
