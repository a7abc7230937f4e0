"""``python -m mtc.stack start|stop|restart|status``: the tracking server (mtc.stack.server.main)."""

import sys

from mtc.stack.server import main

sys.exit(main())
