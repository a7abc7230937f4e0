"""Where a command's CPU goes, by kind of process (Linux): the test suite, a study, a sweep.

    python benchmarks/process_cpu.py [--interval 0.2] [--top 25] -- COMMAND [ARGS...]

Runs COMMAND and, while it runs, reads the CPU time (user + system, from /proc/<pid>/stat) of
every process of the machine every ``--interval`` seconds, so that the processes the command
starts and does not wait for (Ray's GCS, raylet, agents and workers, tracking servers) are
counted too, and so is anything else running: run it with nothing else running;
then prints the CPU seconds by kind of process (a Ray worker by the title Ray gives it, a driver
by its ``python -m`` module, ...), their count and their share, largest first. A process is
counted from its first sample to its last: one that lives less than an interval is missed, and
one that ran before the command only for what it used after it started. No Python package
reads another process's CPU here without psutil, which nothing else of mtc needs; the /proc
files are what psutil would read.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
RAY_PARTS = {"gcs_server": "Ray GCS", "/raylet": "Ray raylet", "dashboard/agent.py": "Ray dashboard agent",
             "dashboard/dashboard.py": "Ray dashboard", "runtime_env/agent": "Ray runtime env agent",
             "log_monitor.py": "Ray log monitor"}


def read_process(pid: str) -> tuple[float, int, str] | None:
    """(CPU seconds so far, start time in ticks, command line) of a process; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    return (int(fields[11]) + int(fields[12])) / TICKS, int(fields[19]), command or f"[{name}]"


def kind(command: str) -> str:
    """A process's kind, from its command line (Ray retitles its workers ``ray::<what they run>``)."""
    if command.startswith("ray::"):
        return command.split()[0]
    for part, name in RAY_PARTS.items():
        if part in command:
            return name
    if "default_worker.py" in command:
        return "Ray worker (before its title)"
    if "exec(eval(sys.stdin.readline()))" in command:
        return "pytest-xdist worker"
    if " -m pytest" in command:
        return "pytest"
    module = re.search(r" -m (\S+)", command)
    if module:
        return f"python -m {module.group(1)}"
    if command.startswith("["):
        return command
    program = command.split()[0].rsplit("/", 1)[-1]
    return f"{program} {command.split()[1].rsplit('/', 1)[-1]}" if program.startswith("python") and " " in command \
        else program


def sample(command: list[str], interval: float) -> tuple[int, dict[tuple[str, int], tuple[float, float, str]]]:
    """Run ``command``; return its exit code and, per process seen (pid, start), (CPU at its first
    sample, CPU at its last, command line at its last)."""
    seen: dict[tuple[str, int], tuple[float, float, str]] = {}
    me = str(os.getpid())
    child = subprocess.Popen(command)
    while True:
        done = child.poll() is not None
        for pid in filter(str.isdigit, os.listdir("/proc")):
            if pid == me:
                continue
            process = read_process(pid)
            if process is None:
                continue
            cpu, start, line = process
            first = seen.get((pid, start), (cpu,))[0]
            seen[(pid, start)] = (first, cpu, line)
        if done:
            return child.returncode, seen
        time.sleep(interval)


def by_kind(seen: dict, started_before: set) -> dict[str, list[float]]:
    """CPU seconds and process count per kind; a process already running when sampling began counts
    only what it used since."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for key, (first, last, line) in seen.items():
        total = totals[kind(line)]
        total[0] += last - first if key in started_before else last
        total[1] += 1
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    before = {(pid, p[1]) for pid in filter(str.isdigit, os.listdir("/proc")) if (p := read_process(pid))}
    began = time.perf_counter()
    code, seen = sample(command, args.interval)
    wall = time.perf_counter() - began
    totals = by_kind(seen, before)
    whole = sum(cpu for cpu, _ in totals.values())
    print(f"\n{len(seen)} processes, {whole:.1f} s of CPU in {wall:.1f} s of wall ({whole / wall:.2f} cores busy)")
    print(f"{'CPU s':>9} {'share':>6} {'count':>6} {'s each':>7}  kind")
    for name, (cpu, count) in sorted(totals.items(), key=lambda item: -item[1][0])[:args.top]:
        print(f"{cpu:9.1f} {100 * cpu / whole:5.1f}% {int(count):6d} {cpu / count:7.2f}  {name}")
    return code


if __name__ == "__main__":
    sys.exit(main())
