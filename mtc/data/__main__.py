"""``python -m mtc.data describe <name> [<name> ...]``: tasks x classes counts and d.

``python -m mtc.data list`` lists the data configs. Loading goes through the cache; ``all``
is every data config but ``files``, which needs the user's paths.

``python -m mtc.data root`` prints the folder of the raw corpora and what set it;
``python -m mtc.data root FOLDER`` sets it for every later command of this user (the user
config file of mtc.data.sources), ``--unset`` removes that setting.
"""

from __future__ import annotations

import argparse
import sys
import time

from mtc.cli import available, compose_config
from mtc.data.sources import find_data_root, resolved, set_user_data_root, user_config_file
from mtc.data.spec import data_spec
from mtc.errors import InputError


def describe(name: str, overrides: list[str], seed: int = 0) -> str:
    if name not in available("data"):
        raise InputError(f"unknown data {name!r}; available: {', '.join(available('data'))}")
    cfg = compose_config([f"data={name}", *overrides])
    start = time.perf_counter()
    spec = data_spec(cfg.data)
    dataset = spec.load(seed)
    seconds = time.perf_counter() - start
    dropped = dataset.meta.get("dropped_empty")
    lines = [dataset.describe(), f"  follows: {cfg.data.get('follows', '-')}; loaded in {seconds:.2f} s"]
    if spec.draw == "per_seed":
        lines.append(f"  a fresh random draw per seed; this is the draw of seed {seed} (--seed)")
    if dropped and any(dropped.values()):
        lines.append(f"  documents dropped as empty after term selection: {dropped}")
    return "\n".join(lines)


def show_root() -> str:
    """The data root every command would use now, and what set it.

    Returns
    -------
    str
        Two lines: the folder, then its source (the config's ``data.root``, ``MTC_DATA_DIR``,
        the user config file or the default).
    """
    path, source = find_data_root(compose_config([]).data.root)
    how = {"data.root": "data.root in conf/config.yaml",
           "MTC_DATA_DIR": "the environment variable MTC_DATA_DIR",
           "default": "nothing: the default (python -m mtc.data root FOLDER sets one)"}
    return f"{path}\n  set by {how.get(source, f'the user setting in {source}')}"


def set_root(folder: str | None) -> str:
    """Write (``folder``) or remove (None) the user's data root; what the command then prints.

    Parameters
    ----------
    folder : str or None
        The corpora's folder, or None to remove the setting.

    Returns
    -------
    str
        What was done, and the data root every command now uses.

    Raises
    ------
    InputError
        ``folder`` is a file or no folder, or the user config file cannot be written
        (set_user_data_root).
    """
    path = None if folder is None else resolved(folder)
    if path is not None and path.exists() and not path.is_dir():
        raise InputError(f"{path} is a file, not a folder: give the folder that holds the corpora (e.g. reuters21578/)")
    config = set_user_data_root(folder)
    done = f"data root removed from {config}" if folder is None else f"data root written to {config}"
    return f"{done}\nnow: {show_root()}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mtc.data")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("describe", help="print tasks x classes counts and the feature dimension")
    show.add_argument("names", nargs="+", help="data config names (conf/data/*.yaml), or 'all'")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="a Hydra override such as data.params.text.n_features=5000")
    show.add_argument("--seed", type=int, default=0, help="the draw to show for data configs with draw: per_seed")
    sub.add_parser("list", help="list the data configs")
    root = sub.add_parser("root", help="print the folder of the raw corpora and what set it; with FOLDER, set it "
                                       f"for this user (in {user_config_file()})")
    root.add_argument("folder", nargs="?", help="the folder that holds the corpora (reuters21578/, webkb/, ...)")
    root.add_argument("--unset", action="store_true", help="remove this user's setting")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(available("data")))
        return 0
    if args.command == "root" and args.folder and args.unset:
        parser.error("root: give a FOLDER or --unset, not both")
    try:
        if args.command == "root":
            print(set_root(args.folder) if args.folder or args.unset else show_root())
            return 0
        names = [name for name in available("data") if name != "files"] if args.names == ["all"] else args.names
        for name in names:
            print(describe(name, args.set, args.seed))
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
