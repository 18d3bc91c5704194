"""``python -m faultload.router``: serve until SIGTERM/SIGINT (see :func:`faultload.router.supervisor.main`)."""

import sys

from faultload.router.supervisor import main

sys.exit(main())
