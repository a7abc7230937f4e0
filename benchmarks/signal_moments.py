"""A stop signal at every moment of a sweep or study, tried several times: how often the driver
exits with the documented code (130, 143, 129), one line, no orphan process and no lock left.

    .venv/bin/python benchmarks/signal_moments.py --tries 5 --load 2

Runs tests/test_orphans.py's moment test (data loading, Ray starting, Ray started, first
trials, report, sweep finished, a study's compare) ``--tries`` times, with ``--load`` busy
processes beside it standing in for a loaded machine (CI runs two test processes on two
cores), and prints per moment and signal the tries that held and the first line of each that
did not.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/test_orphans.py::test_a_stop_signal_at_any_moment_exits_with_its_code_one_line_no_orphan_and_no_lock"


def busy() -> None:
    while True:
        pass


def one_try(report: Path) -> dict[str, str]:
    """{moment-signal: "" if it held, else the failure's first line} of one pytest run."""
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", TEST, f"--junitxml={report}"],
                   cwd=ROOT, capture_output=True, text=True)
    outcome = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        case_id = case.get("name").split("[", 1)[1].rstrip("]")
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        outcome[case_id] = "" if failed is None else (failed.get("message") or "failed").splitlines()[0][:160]
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes running beside the tries")
    args = parser.parse_args()
    load = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for process in load:
        process.start()
    held, failures = defaultdict(int), defaultdict(list)
    began = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for attempt in range(args.tries):
                for case_id, failure in one_try(Path(folder) / f"try{attempt}.xml").items():
                    held[case_id] += not failure
                    if failure:
                        failures[case_id].append(failure)
                print(f"try {attempt + 1} of {args.tries} done, {time.monotonic() - began:.0f} s", flush=True)
    finally:
        for process in load:
            process.terminate()
    print(f"\n{os.cpu_count()} CPUs, {args.load} busy processes beside, {args.tries} tries, "
          f"{time.monotonic() - began:.0f} s\n")
    print("| moment-signal | held | failures |\n|---|---|---|")
    for case_id in held:
        print(f"| {case_id} | {held[case_id]} of {args.tries} | {'; '.join(failures[case_id]) or '-'} |")


if __name__ == "__main__":
    main()
