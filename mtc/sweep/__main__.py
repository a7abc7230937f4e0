"""``python -m mtc.sweep method=snmf data=synthetic``: one sweep (mtc.sweep.driver.main)."""

from mtc.cli import launch
from mtc.sweep.driver import main

launch(main)
