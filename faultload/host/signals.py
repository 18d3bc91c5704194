"""What ends a run from outside: Ctrl-C (the terminal sends it to the whole foreground group),
`kill`/`timeout`/CI cancelling, and a closed terminal. Apart from :mod:`faultload.host.processes` (which loads
psutil) so the suite's plugin, loaded by every pytest run, can name them."""

from __future__ import annotations

import signal

INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
