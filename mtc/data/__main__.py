"""``python -m mtc.data describe <name> [<name> ...]``: tasks x classes counts and d.

``python -m mtc.data list`` lists the data configs. Loading goes through the cache; ``all``
is every data config but ``files``, which needs the user's paths.
"""

from __future__ import annotations

import argparse
import sys
import time

from mtc.cli import available, compose_config
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mtc.data")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("describe", help="print tasks x classes counts and the feature dimension")
    show.add_argument("names", nargs="+", help="data config names (conf/data/*.yaml), or 'all'")
    show.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="a Hydra override such as data.params.text.n_features=5000")
    show.add_argument("--seed", type=int, default=0, help="the draw to show for data configs with draw: per_seed")
    sub.add_parser("list", help="list the data configs")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(available("data")))
        return 0
    names = [name for name in available("data") if name != "files"] if args.names == ["all"] else args.names
    try:
        for name in names:
            print(describe(name, args.set, args.seed))
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
