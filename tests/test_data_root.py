"""The folder of the raw corpora: the config's data.root, then MTC_DATA_DIR, then the user's
setting (``python -m mtc.data root FOLDER``, kept in $XDG_CONFIG_HOME/mtc/config.toml or
~/.config/mtc/config.toml), then ~/.cache/mtc; and every command reads it."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mtc.data import load_dataset
from mtc.data.__main__ import main
from mtc.data.sources import RawDataError, data_root, find_data_root, user_config_file
from mtc.errors import InputError


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh HOME, no XDG_CONFIG_HOME and no MTC_DATA_DIR: the user's own settings untouched."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("MTC_DATA_DIR", raising=False)
    return tmp_path / "home"


def folder(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_each_setting_comes_before_the_next(home, tmp_path, monkeypatch):
    assert find_data_root() == (home / ".cache" / "mtc", "default")
    user, env, configured = (folder(tmp_path / name) for name in ("user", "env", "configured"))
    assert main(["root", str(user)]) == 0
    config = home / ".config" / "mtc" / "config.toml"
    assert find_data_root() == (user, str(config))
    monkeypatch.setenv("MTC_DATA_DIR", str(env))
    assert find_data_root() == (env, "MTC_DATA_DIR")
    assert find_data_root(str(configured)) == (configured, "data.root")
    monkeypatch.setenv("MTC_DATA_DIR", "")  # set but empty: as if unset
    assert data_root() == user


def test_xdg_config_home_holds_the_file_when_absolute(home, tmp_path, monkeypatch):
    assert user_config_file() == home / ".config" / "mtc" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_config_file() == tmp_path / "xdg" / "mtc" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/xdg")  # the XDG rule: a relative path is ignored
    assert user_config_file() == home / ".config" / "mtc" / "config.toml"


def test_the_command_sets_prints_and_removes_the_setting(home, tmp_path, monkeypatch, capsys):
    corpora = folder(tmp_path / "work" / "corpora")
    monkeypatch.chdir(tmp_path / "work")
    config = home / ".config" / "mtc" / "config.toml"
    assert main(["root", "corpora"]) == 0  # relative to the working folder, stored absolute
    assert tomllib.loads(config.read_text()) == {"data": {"root": str(corpora)}}
    assert capsys.readouterr().out == (f"data root written to {config}\n"
                                       f"now: {corpora}\n  set by the user setting in {config}\n")
    monkeypatch.chdir(tmp_path)  # another folder: the same root
    assert main(["root"]) == 0
    assert capsys.readouterr().out == f"{corpora}\n  set by the user setting in {config}\n"
    monkeypatch.setenv("MTC_DATA_DIR", str(tmp_path))
    assert main(["root"]) == 0
    assert capsys.readouterr().out == f"{tmp_path}\n  set by the environment variable MTC_DATA_DIR\n"
    monkeypatch.delenv("MTC_DATA_DIR")
    assert main(["root", "--unset"]) == 0
    assert not config.exists()
    assert capsys.readouterr().out.endswith(f"now: {home / '.cache' / 'mtc'}\n  set by nothing: the default "
                                            "(python -m mtc.data root FOLDER sets one)\n")


def test_a_missing_folder_or_a_file_with_other_settings_is_refused_and_nothing_written(home, tmp_path, capsys):
    assert main(["root", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"error: no folder {tmp_path / 'nope'}: give the folder that holds the " \
                                      "corpora (e.g. reuters21578/)\n"
    config = home / ".config" / "mtc" / "config.toml"
    assert not config.exists()
    config.parent.mkdir(parents=True)
    config.write_text('[data]\nroot = "/somewhere"\ncache = "/else"\n')
    assert main(["root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {config} holds other settings than data.root: edit it by hand\n"
    assert config.read_text() == '[data]\nroot = "/somewhere"\ncache = "/else"\n'


def test_an_odd_folder_name_is_written_as_valid_toml(home, tmp_path):
    odd = folder(tmp_path / 'quote" back\\slash tab\t é')
    assert main(["root", str(odd)]) == 0
    assert data_root() == odd


def test_a_hand_written_relative_root_is_against_the_files_folder(home, tmp_path):
    config = user_config_file()
    config.parent.mkdir(parents=True)
    config.write_text('[data]\nroot = "corpora"\n')
    assert data_root() == config.parent / "corpora"
    config.write_text("[data]\nroot = '~/corpora'\n")
    assert data_root() == home / "corpora"


@pytest.mark.parametrize("text, message", [
    ("[data\n", r"config.toml: cannot read mtc's user settings \(.*\); fix or delete the file"),
    ("[data]\nroot = 3\n", r"config.toml: expected a \[data\] table with root = \"<folder>\", found data = {'root': 3}"),
    ('data = "/corpora"\n', r"config.toml: expected a \[data\] table .* found data = '/corpora'"),
])
def test_a_bad_user_file_is_one_clear_error(home, text, message):
    config = user_config_file()
    config.parent.mkdir(parents=True)
    config.write_text(text)
    with pytest.raises(InputError, match=message):
        data_root()


def test_loading_a_corpus_looks_in_the_users_root(home, tmp_path):
    empty = folder(tmp_path / "corpora")
    assert main(["root", str(empty)]) == 0
    with pytest.raises(RawDataError, match=f"missing raw file {empty}/reuters21578/reuters21578.tar.xz"):
        load_dataset("reuters")


@pytest.mark.parametrize("command", [["mtc.data", "describe", "reuters"], ["mtc.sweep", "method=kmeans", "data=reuters"]])
def test_commands_read_the_users_root(tmp_path, command):
    """A command started afresh, with only the user setting naming the (here empty) corpora folder."""
    xdg, empty = folder(tmp_path / "xdg"), folder(tmp_path / "corpora")
    env = {key: value for key, value in os.environ.items() if key != "MTC_DATA_DIR"} | {"XDG_CONFIG_HOME": str(xdg)}
    run = [sys.executable, "-m", "mtc.data", "root", str(empty)]
    assert subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, timeout=120).returncode == 0
    done = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"error: missing raw file {empty}/reuters21578/reuters21578.tar.xz" in done.stderr
