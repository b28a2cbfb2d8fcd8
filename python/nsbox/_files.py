# SPDX-License-Identifier: LGPL-2.1-or-later
"""The files of a run: ``files=`` written to a private directory for ``--copy-in``, and what
``--copy-out`` brought back read into ``Result.files``."""

import os
from typing import List, Mapping, Tuple, Union

from .result import Result

#: Where the ``files`` dict appears inside the sandbox: the working directory, where code looks
#: (``pd.read_csv("sales.csv")``).
FILES_DIR = "/work"

_Data = Union[str, bytes]


def _as_bytes(data: _Data, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    raise TypeError(f"{what} must be str or bytes, not {type(data).__name__}")


def _check_file_name(name: str) -> List[str]:
    """Split a ``files`` key into path components; refuse anything that could leave the
    files directory."""
    if not isinstance(name, str):
        raise TypeError(f"file name must be str, not {type(name).__name__}")
    if not name or "\0" in name:
        raise ValueError(f"invalid file name {name!r}")
    if name.startswith("/"):
        raise ValueError(f"file name {name!r} must be relative (it appears under {FILES_DIR})")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"invalid file name {name!r} (empty, or contains '..')")
    return parts


def _modes() -> Tuple[int, int]:
    """The modes of the directories and files that ``files`` makes, below a 0700 directory of
    the caller's: 0700 and 0600. nsbox reads them as the caller and copies them into the
    sandbox (``--copy-in``), so not even root's sandboxes, which run as another host uid, need
    to reach them."""
    return (0o700, 0o600)


def _write_file(path: str, data: bytes, mode: int = 0o600) -> None:
    """Create path (which must not exist) with exactly mode, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)


def _write_files(root: str, files: Mapping[str, _Data]) -> None:
    dir_mode, file_mode = _modes()
    os.mkdir(root, 0o700)
    os.chmod(root, dir_mode)
    for name, data in files.items():
        parts = _check_file_name(name)
        content = _as_bytes(data, f"files[{name!r}]")
        parent = root
        for part in parts[:-1]:
            parent = os.path.join(parent, part)
            if not os.path.isdir(parent):
                try:
                    os.mkdir(parent, 0o700)
                except OSError as e:
                    raise ValueError(f"cannot create directory for file {name!r}: {e}") from e
                os.chmod(parent, dir_mode)
        try:
            _write_file(os.path.join(parent, parts[-1]), content, file_mode)
        except OSError as e:
            raise ValueError(f"cannot create file {name!r}: {e}") from e


def _collect_files(result: Result) -> Result:
    """Fill result.files from what nsbox copied out: {sandbox path: bytes}. Each file is read
    from where nsbox wrote it (a directory of ours or the caller's copy_out_dir), refusing a
    symlink."""
    copy_out = result.raw.get("copy_out") or {}
    result.copy_out = copy_out or None
    for entry in copy_out.get("copied") or []:
        host_path = entry.get("host_path")
        if not host_path:
            continue
        fd = os.open(host_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            result.files[str(entry["path"])] = f.read()
    return result
