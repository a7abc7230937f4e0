"""``python -m mtc.sweep method=snmf data=synthetic``: one sweep (mtc.sweep.command.main)."""

from mtc.cli import launch
from mtc.sweep.command import main

launch(main)
