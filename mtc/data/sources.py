"""Raw files: where they live under the data root, their checksums (and the user's own files', for
the cache key: user_file_checksums), where to get them.

Data root, first found: the config's ``data.root``, the env var ``MTC_DATA_DIR``, the user's
setting (``root`` under ``[data]`` in ``$XDG_CONFIG_HOME/mtc/config.toml``, else
``~/.config/mtc/config.toml``; ``python -m mtc.data root FOLDER`` writes it), then
``~/.cache/mtc``. A raw file that is missing is downloaded when it has a canonical address
whose bytes we can verify; otherwise the error names the file and where to put it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import tomllib
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from mtc.errors import InputError


@dataclass(frozen=True)
class RawFile:
    """A raw corpus file: where it lives under the data root, its checksum, and where to get it."""

    path: str  # relative to the data root
    checksum: str
    algorithm: str = "sha256"
    url: str | None = None  # canonical address with byte-identical content, if any
    origin: str = ""  # where a user can get it when there is no url


WEBKB_ORIGIN = "the CMU 4 Universities data (see ../shared/data/webkb/SOURCE.md for how this .tar.xz was packed)"
TSC = "Dai et al. splits, github.com/cswhjiang/Transfer-Spectral-Clustering"
LSSMTC = "MALSAR data/Newsgroup, github.com/jiayuzhou/MALSAR"
RAW_FILES = {
    "webkb": RawFile("webkb/webkb-data.tar.xz", "844e98e0b8b71433e17aa1132064b71f5aa987d58d734c3ccceb93eb88d3daf1",
                     origin=WEBKB_ORIGIN),
    "reuters21578": RawFile("reuters21578/reuters21578.tar.xz",
                            "0d612d37a7730b45178220274b11d4c5b5690f68cdbad5b3dd32170226c1273a",
                            origin="Reuters-21578 Distribution 1.0 repacked as .tar.xz (see its SOURCE.md)"),
    "20news": RawFile("20newsgroups/20news-bydate.tar.xz",
                      "206c6cb0223d8cc15bd2b9a05c287b98c664c6b908ba90bca6c960e46ccaea9f",
                      origin="20news-bydate repacked as .tar.xz (see its SOURCE.md)"),
    "usps_train": RawFile("usps/zip.train.gz", "66ebf231ab51f2cf6ac1a892d0f98ccffee1079d7a5db638c1f11f366046ca16",
                          url="https://hastie.su.domains/ElemStatLearn/datasets/zip.train.gz"),
    "usps_test": RawFile("usps/zip.test.gz", "8dacc3c6e136af6c3488de9e5113a7daf140c8c2f1f0b61c54ee02f03f1a962f",
                         url="https://hastie.su.domains/ElemStatLearn/datasets/zip.test.gz"),
    "mnist_test_images": RawFile("mnist/t10k-images-idx3-ubyte.gz",
                                 "167310007f03058885c7e95e6c0b19c20de5c7fd3031f4cbdadc9014a523d80b",
                                 url="https://ossci-datasets.s3.amazonaws.com/mnist/t10k-images-idx3-ubyte.gz"),
    "mnist_test_labels": RawFile("mnist/t10k-labels-idx1-ubyte.gz",
                                 "fc607395669ec21321ea83e4b82c0544b7e8e63ff5b34337c06bc0a17cc0da3c",
                                 url="https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz"),
    "mnist_train_labels": RawFile("mnist/train-labels-idx1-ubyte.gz",
                                  "ec02e7948609e5754d47881c09b8afdd8dfa60600b9e5388c8c54a67069ec772",
                                  url="https://ossci-datasets.s3.amazonaws.com/mnist/train-labels-idx1-ubyte.gz"),
    # md5 from torchvision's MNIST checksum list; the 60k training images are optional
    "mnist_train_images": RawFile("mnist/train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", "md5",
                                  url="https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz"),
    "comp_vs_sci_1": RawFile("lssmtc_newsgroups/comp.vs.sci_task1.mat",
                             "136e73185215cdc5fe7af4c2e0d86dae9da864e119fef95253ef6614d139d7ab", origin=LSSMTC),
    "comp_vs_sci_2": RawFile("lssmtc_newsgroups/comp.vs.sci_task2.mat",
                             "efafdffe36f05668f9cd638cbfad45a96b6e69e385a65fb7a24dda6082adec52", origin=LSSMTC),
    "rec_vs_talk_1": RawFile("lssmtc_newsgroups/rec.vs.talk_Task1.mat",
                             "2ccc2c933adb5e9a88524e0d0a90022ee925e3395fead485c2d7d31a14149997", origin=LSSMTC),
    "rec_vs_talk_2": RawFile("lssmtc_newsgroups/rec.vs.talk_Task2.mat",
                             "162fe06ddbad645577a2c538645f72115416811f8ee6dffc2fe2944a1c632e08", origin=LSSMTC),
    "OrgsPeople_src": RawFile("tsc_reuters/OrgsPeople_src.mat",
                              "c8b9f746e1c264495e99ed4146860552a8ae34a09908b701136a41790f426f1f", origin=TSC),
    "OrgsPeople_tar": RawFile("tsc_reuters/OrgsPeople_tar.mat",
                              "eaed1ba8c112bb52cfa1406c4566e72e85b65be932f7264014c9410753abc4ac", origin=TSC),
    "OrgsPlaces_src": RawFile("tsc_reuters/OrgsPlaces_src.mat",
                              "5afabffd3849a4df96b8cdb5b5cce95d6d5a56a7afb59cc72bc1084ec8da918a", origin=TSC),
    "OrgsPlaces_tar": RawFile("tsc_reuters/OrgsPlaces_tar.mat",
                              "fe081f5c1541c135f898b543e603966c4d201cbd315d57179cfc146dd10a8a85", origin=TSC),
    "PeoplePlaces_src": RawFile("tsc_reuters/PeoplePlaces_src.mat",
                                "d05eb255118bd11817916d5f321ecf2f3a7c50fccda6610868e72b6d1a8c864a", origin=TSC),
    "PeoplePlaces_tar": RawFile("tsc_reuters/PeoplePlaces_tar.mat",
                                "464696da75344a6813200f1b7d746f76376ab1a928f8e11ace2dacde056fee18", origin=TSC),
}


DEFAULT_DATA_ROOT = "~/.cache/mtc"


class RawDataError(InputError):
    """A raw file is missing or does not match its checksum."""


def configured_dir(configured: str | None, env_var: str, default: str) -> Path:
    """The configured folder, else the one the env var names, else the default (absolute)."""
    return Path(configured or os.environ.get(env_var) or default).expanduser().resolve()


def data_root(configured: str | None = None) -> Path:
    """The folder of the raw corpora (absolute); see ``find_data_root`` for the order."""
    return find_data_root(configured)[0]


def find_data_root(configured: str | None = None) -> tuple[Path, str]:
    """The data root and what set it, first found: ``configured`` (the config's ``data.root``),
    the env var ``MTC_DATA_DIR``, the user config file, then ``~/.cache/mtc``.

    Parameters
    ----------
    configured : str or None
        The config's ``data.root``.

    Returns
    -------
    path : Path
        The data root, absolute.
    source : str
        ``"data.root"``, ``"MTC_DATA_DIR"``, the user config file's path, or ``"default"``.

    Raises
    ------
    InputError
        The user config file cannot be read, or its ``data.root`` is not a string.
    """
    if configured:
        return resolved(configured), "data.root"
    if os.environ.get("MTC_DATA_DIR"):
        return resolved(os.environ["MTC_DATA_DIR"]), "MTC_DATA_DIR"
    config = user_config_file()
    root = user_data_root(config)
    if root:  # a relative path is against the file's folder, not the working directory
        return (config.parent / Path(root).expanduser()).resolve(), str(config)
    return resolved(DEFAULT_DATA_ROOT), "default"


def user_config_file() -> Path:
    """The user's settings file: ``$XDG_CONFIG_HOME/mtc/config.toml`` when that variable holds an
    absolute path (the XDG base directory rule), else ``~/.config/mtc/config.toml``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path("~/.config").expanduser()) / "mtc" / "config.toml"


def user_settings(config: Path) -> dict:
    """The user config file's settings as parsed TOML, ``{}`` when there is no such file.

    Parameters
    ----------
    config : Path
        The file, ``user_config_file()``.

    Returns
    -------
    dict
        Its tables and keys.

    Raises
    ------
    InputError
        The file cannot be read or is not TOML.
    """
    try:
        with open(config, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise InputError(f"{config}: cannot read mtc's user settings ({error}); fix or delete the file") from None


def user_data_root(config: Path) -> str | None:
    """``root`` under ``[data]`` in the user config file, None when not set.

    Parameters
    ----------
    config : Path
        The file, ``user_config_file()``.

    Returns
    -------
    str or None
        The folder as written there.

    Raises
    ------
    InputError
        The file cannot be read, or ``data`` is not a table or ``data.root`` not a string.
    """
    data = user_settings(config).get("data", {})
    root = data.get("root") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(root, str | None):
        raise InputError(f"{config}: expected a [data] table with root = \"<folder>\", found data = {data!r}")
    return root


def set_user_data_root(folder: str | None) -> Path:
    """Write the data root into the user config file, or remove the setting.

    The file holds this one setting, so it is written anew (or deleted); a file that holds
    other settings is left alone for the user to edit.

    Parameters
    ----------
    folder : str or None
        An existing folder (a relative path is against the working directory, stored
        absolute); None removes the setting.

    Returns
    -------
    Path
        The user config file.

    Raises
    ------
    InputError
        ``folder`` is not an existing folder, or the file holds other settings or cannot be
        read or written.
    """
    config = user_config_file()
    settings = user_settings(config)
    data = settings.get("data", {})
    if set(settings) - {"data"} or not isinstance(data, dict) or set(data) - {"root"}:
        raise InputError(f"{config} holds other settings than data.root: edit it by hand")
    try:
        if folder is None:
            config.unlink(missing_ok=True)
            return config
        path = resolved(folder)
        if not path.is_dir():
            raise InputError(f"no folder {path}: give the folder that holds the corpora (e.g. reuters21578/)")
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"# mtc's user settings (python -m mtc.data root FOLDER writes this file)\n"
                          f"[data]\nroot = {toml_string(str(path))}\n", encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot write {config}: {error}") from None
    return config


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters escaped."""
    escaped = (char if char >= " " and char not in '"\\\x7f' else f"\\u{ord(char):04x}" for char in text)
    return f'"{"".join(escaped)}"'


def file_checksum(path: Path, algorithm: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, algorithm).hexdigest()


def content_digest(path: Path) -> str:
    """sha256 of a file's bytes; of a folder, of its files' relative names and sha256s.

    Parameters
    ----------
    path : Path
        A file or a folder.

    Returns
    -------
    str
        The hex digest.
    """
    if not path.is_dir():
        return file_checksum(path, "sha256")
    digest = hashlib.sha256()
    for member in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{member.relative_to(path).as_posix()}\0{file_checksum(member, 'sha256')}\0".encode())
    return digest.hexdigest()


def user_file_checksums(paths: list[str]) -> dict[str, str | None]:
    """The content digest of every path, for the cache key.

    Parameters
    ----------
    paths : list of str
        The files and folders of ``data.params.paths``.

    Returns
    -------
    dict
        Absolute path -> sha256 hex digest, None for a path that cannot be read (missing or
        not readable) or must not be (neither a regular file nor a folder: a FIFO would block
        the read, a device such as /dev/zero never end it); ``mtc.data.files.build_files``
        reports it.
    """
    found = {}
    for path in map(resolved, paths):
        try:
            mode = path.stat().st_mode
            readable = stat.S_ISREG(mode) or stat.S_ISDIR(mode)
            found[str(path)] = content_digest(path) if readable else None
        except OSError:
            found[str(path)] = None
    return found


def resolved(path: str) -> Path:
    """A configured path made absolute (a relative one is against the working directory)."""
    return Path(path).expanduser().resolve()


@lru_cache(maxsize=64)
def raw_checksum(path: str, device: int, inode: int, size: int, mtime_ns: int, algorithm: str) -> str:
    """A raw corpus file's checksum, computed once per process for one version of the file
    (device, inode, size and modification time): a study loads thousands of cached draws, and
    re-hashing the 20 Newsgroups archive for each was a quarter of checking a finished study.
    The user's own files (mtc.data.files) are hashed afresh at every load."""
    return file_checksum(Path(path), algorithm)


def download(url: str, target: Path, raw: RawFile) -> None:
    """Fetch url to target atomically: a temp file beside it, checked, then renamed. The
    folders made for it are removed again when the download fails (offline: no empty mnist/)."""
    made = [folder for folder in target.parents if not folder.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.NamedTemporaryFile(dir=target.parent, delete=False, suffix=".part") as tmp:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    shutil.copyfileobj(response, tmp)
                tmp.close()
                got = file_checksum(Path(tmp.name), raw.algorithm)
                if got != raw.checksum:
                    raise RawDataError(f"download of {url} has {raw.algorithm} {got}, expected {raw.checksum}")
                os.replace(tmp.name, target)
            finally:
                if os.path.exists(tmp.name):
                    os.unlink(tmp.name)
    except BaseException:
        for folder in made:  # deepest first; one left non-empty keeps those above it
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def raw_file(key: str, root: Path, allow_download: bool = True) -> tuple[Path, str]:
    """The verified path of a raw file and its checksum, downloading it when possible."""
    raw = RAW_FILES[key]
    path = root / raw.path
    if not path.exists():
        if raw.url and allow_download:
            try:
                download(raw.url, path, raw)
            except OSError as error:
                raise RawDataError(f"missing raw file {path}; downloading {raw.url} failed ({error}): "
                                   f"put the file there by hand") from None
        else:
            where = f"download it from {raw.url}" if raw.url else f"get it from {raw.origin}"
            raise RawDataError(f"missing raw file {path}: {where} and put it there "
                               f"(or point data.root / MTC_DATA_DIR at a folder that has {raw.path})")
    if not path.is_file():
        raise RawDataError(f"raw file {path} is a folder, not a file: put the file {raw.path} there (or point "
                           "data.root / MTC_DATA_DIR at a folder that has it)")
    stat = path.stat()
    got = raw_checksum(str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, raw.algorithm)
    if got != raw.checksum:
        raise RawDataError(f"raw file {path} is corrupted: {raw.algorithm} {got}, expected {raw.checksum}")
    return path, got
