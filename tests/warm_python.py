"""``python -m MODULE ARGS`` for tests that run a command many times, each run a process of its
own forked from a warm interpreter that has already imported the heavy libraries the commands
use (numpy, scipy, scikit-learn, pandas, Hydra, MLflow; not mtc, nor Ray), so a command that
stops at its checks costs its checks, not a second of imports (test_bad_inputs runs about a
hundred).

The interpreter is started once per test process with the caller's PYTHONHASHSEED and serves
one command at a time over a pipe: it forks, and the child takes the command's folder,
environment, arguments and standard streams, runs the module as ``python -m`` does
(runpy, ``sys.path[0]`` the folder), runs its exit handlers and exits with its code. What a
fresh interpreter reads only at its start (PYTHONPATH, PYTHONHASHSEED, -X options) is the warm
one's: callers whose commands differ there use subprocess.

Its imports are waited for once (it says when it is ready), not counted in a command's time; an
answer that does not come (the fork's pid, a killed child's code) ends that interpreter, so the
next command gets a new one instead of reading an answer meant for the one before.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRELOADED = ("numpy", "scipy.sparse", "scipy.optimize", "scipy.linalg", "sklearn.base", "sklearn.cluster",
             "sklearn.metrics", "pandas", "omegaconf", "hydra", "hydra.utils", "mlflow", "mlflow.tracking",
             "sqlalchemy")
READY_SECONDS = 300  # for the interpreter's imports, a fork's pid and a killed child's code

SERVE = """
import importlib, json, os, sys
for name in sys.argv[1].split(","):
    importlib.import_module(name)
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import warm_python
warm_python.serve()
"""


def child(request: dict) -> None:
    """In the forked child: become ``python -m module args`` in ``cwd`` with ``env``; never returns."""
    import runpy
    import traceback

    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR read again
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.argv = [request["module"], *request["args"]]
        sys.path[0] = request["cwd"]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if done.code is not None and not isinstance(done.code, int):
                print(done.code, file=sys.stderr)
        except BaseException:  # what the interpreter prints for an uncaught exception
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()  # as the interpreter does when it exits
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    """Say it is ready (its imports done), then read a request per line on stdin, fork a child
    for it, answer its pid, then its exit code."""
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


class WarmPython:
    """A warm interpreter; ``run`` is subprocess.run for ``python -m module args`` (text output)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
        self.process = subprocess.Popen([sys.executable, "-c", SERVE, ",".join(PRELOADED), __file__],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0)
        self.pending = b""
        self.outputs = Path(tempfile.mkdtemp(prefix="mtc-warm-"))
        try:  # its imports take seconds, many more on a loaded machine: not a command's time
            self.read_answer(READY_SECONDS, "the warm interpreter's imports")["ready"]
        except BaseException:
            self.close()
            raise

    def run(self, module: str, args: list[str], cwd: Path, env: dict, timeout: float = 120
            ) -> subprocess.CompletedProcess:
        stdout, stderr = self.outputs / "stdout", self.outputs / "stderr"
        request = {"module": module, "args": [str(arg) for arg in args], "cwd": str(cwd), "env": env,
                   "stdout": str(stdout), "stderr": str(stderr)}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        try:
            pid = self.read_answer(READY_SECONDS, "the warm interpreter's fork")["pid"]
            try:
                answer = self.read_answer(timeout, f"python -m {module}")
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)  # the warm interpreter then answers, and serves the next
                self.read_answer(READY_SECONDS, "the warm interpreter's killed child")
                raise
        except BaseException as stopped:
            if not (isinstance(stopped, subprocess.TimeoutExpired) and stopped.cmd == f"python -m {module}"):
                self.close()  # an answer is missing: the next one read could be this command's
            raise
        return subprocess.CompletedProcess([sys.executable, "-m", module, *args], answer["code"],
                                           stdout.read_text(errors="replace"), stderr.read_text(errors="replace"))

    def read_answer(self, timeout: float, what: str) -> dict:
        """The warm interpreter's next line (read from its pipe as it comes: two answers can
        arrive at once); TimeoutExpired naming ``what`` when none comes within ``timeout``."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise subprocess.TimeoutExpired(what, timeout)
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"the warm interpreter ended (exit {self.process.wait()})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        subprocess.run(["rm", "-rf", str(self.outputs)], check=False)


_WARM: list[WarmPython] = []


def warm_run(module: str, args: list[str], cwd: Path, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``cwd`` with ``env``, forked from this test process's warm interpreter."""
    if not _WARM or _WARM[0].process.poll() is not None:
        _WARM[:] = [WarmPython()]
        atexit.register(_WARM[0].close)
    return _WARM[0].run(module, args, cwd, env, timeout)
