"""``python -m mtc.sweep method=snmf data=synthetic``: one sweep (mtc.sweep.command.main)."""

from mtc.cli import ctrl_c_exits_at_once, launch

ctrl_c_exits_at_once()  # before the imports below (about 2 s): Ctrl-C meanwhile is one line, exit 130

from mtc.sweep.command import main  # noqa: E402

launch(main)
