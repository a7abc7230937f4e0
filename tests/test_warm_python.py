"""The warm interpreter of tests/warm_python.py: a command's code, streams, folder and
environment are a fresh process's, and a command that times out leaves the next one its own answer."""

import subprocess

import pytest

from warm_python import warm_run


def test_a_command_gets_its_folder_environment_arguments_and_exit_code(tmp_path):
    (tmp_path / "speaker.py").write_text(
        "import os, sys\nprint(os.getcwd(), os.environ['WORD'], *sys.argv[1:])\n"
        "print('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    done = warm_run("speaker", ["a", "b"], tmp_path, {"WORD": "hello", "PATH": "/usr/bin"})
    assert done.returncode == 3
    assert done.stdout.split() == [str(tmp_path), "hello", "a", "b"]
    assert done.stderr == "to stderr\n"


def test_a_command_that_times_out_is_killed_and_the_next_reads_its_own_answer(tmp_path):
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    (tmp_path / "quick.py").write_text("import sys\nsys.exit(7)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        warm_run("sleeper", [], tmp_path, {}, timeout=1)
    for _ in range(2):
        assert warm_run("quick", [], tmp_path, {}).returncode == 7
