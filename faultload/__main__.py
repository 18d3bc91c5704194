"""``python -m faultload``: the same as the ``faultload`` script."""

import sys

from faultload.cli.main import main

# Guarded: a load worker spawned from `python -m faultload` imports this module again (as __mp_main__).
if __name__ == "__main__":
    sys.exit(main())
