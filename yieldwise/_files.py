"""Writing output files and folders safely: whole or not at all, one writer per target.

Every output of the command line goes through here (docs: the README's "Guarantees"):

* :func:`target_lock` makes one run the only yieldwise writer of a target (a report
  folder or a transducer file) for as long as it runs. The lock is an advisory ``flock``
  on the hidden file ``.NAME.lock`` beside the target; the kernel releases it when the
  process ends, however it ends, so a crashed run never blocks the next one. A second
  run finds the lock taken and stops at once, naming the run that holds it.
* Work happens under a unique hidden name (``.NAME.partial-XXXXXXXX``) in the target's
  folder, removed on any failure or interrupt, and becomes the target by one ``rename``
  at the end (:func:`place_file`, :func:`place_folder`). A name like ``.NAME.partial``
  that someone else made is never touched. Where a hidden name would exceed the
  system's limit on a name (:data:`NAME_MAX` bytes) for a long but legal ``NAME``, it
  holds the start of ``NAME`` and a digest of all of it (:func:`hidden_name`).
* A report folder carries a manifest (:data:`MANIFEST`) listing every file yieldwise
  wrote into it, with sizes and SHA-256 digests. ``--overwrite`` replaces a folder only
  when the manifest is there and the folder holds nothing else, and then deletes only
  the files the manifest lists.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import datetime
import errno
import hashlib
import io
import json
import os
import re
import socket
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MANIFEST",
    "OutputTargetError",
    "output_path",
    "place_file",
    "place_folder",
    "read_manifest",
    "read_table",
    "target_lock",
    "write_manifest",
]

#: The manifest file of a report folder.
MANIFEST = "yieldwise-manifest.json"
MANIFEST_FORMAT = "yieldwise report folder"
MANIFEST_VERSION = 1


#: The longest file name, in bytes, that common file systems allow (ext4, XFS, APFS,
#: NTFS in UTF-16 units); a hidden name longer than this is shortened (:func:`hidden_name`).
NAME_MAX = 255


class OutputTargetError(ValueError):
    """An output target cannot be written: it exists, another run writes it, or it is unsafe."""


def hidden_name(name: str, tag: str, room: int = 0) -> str:
    """The hidden name ``.NAME.TAG`` of a work file beside the file or folder ``name``,
    leaving ``room`` bytes for a random suffix that the caller appends.

    When that would exceed :data:`NAME_MAX` bytes (a long but legal ``name``: the writer's
    error would then name the hidden file, not the user's), ``name`` is cut short and
    followed by ``~`` and a digest of the whole of it, so that each name keeps its own.
    """
    full = f".{name}.{tag}"
    if len(os.fsencode(full)) + room <= NAME_MAX:
        return full
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    budget = NAME_MAX - room - len(os.fsencode(f".~{digest}.{tag}"))
    keep = name
    while keep and len(os.fsencode(keep)) > budget:
        keep = keep[:-1]
    return f".{keep}~{digest}.{tag}"


# ------------------------------------------------------------------ the lock
def _lock_path(target: Path) -> Path:
    return target.parent / hidden_name(target.name, "lock")


def _describe_owner(text: str) -> str:
    try:
        owner = json.loads(text)
        return (
            f"pid {owner['pid']} on {owner['host']}, started {owner['started']}: {owner['command']}"
        )
    except (ValueError, KeyError, TypeError):
        return "a run that has not yet recorded itself"


@contextlib.contextmanager
def target_lock(target: Path) -> Iterator[None]:
    """Be the only yieldwise run writing ``target`` while the body runs.

    Raises :class:`OutputTargetError` naming the other run (pid, host, start time and
    command line) when one holds the lock. The lock file is removed on exit.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: PyStan does not run there anyway
        yield
        return
    path = _lock_path(target)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with os.fdopen(fd) as handle:
                owner = _describe_owner(handle.read())
            raise OutputTargetError(
                f"{target}: another yieldwise run is writing it ({owner}); wait for it to "
                f"finish or choose another output (its lock: {path})"
            ) from None
        # The holder before us may have removed the file between our open and our lock:
        # then we hold a lock on a file nobody else can see, and must start over.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(["yieldwise", *sys.argv[1:]])
            if Path(sys.argv[0]).name == "yieldwise"
            else " ".join(sys.argv),
        }
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(owner).encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still holding the lock: see the inode check above
        os.close(fd)


# ---------------------------------------------------------------- the target
def output_path(out: str | os.PathLike[str], option: str = "--out") -> Path:
    """``out`` as an absolute path that names a new file or folder, checked.

    Refuses paths that name no entry of their own (``/``) and the current folder or a
    folder holding it (``--out .``): the output is renamed into place at the end, and
    the folder a run works in is never replaced.
    """
    text = os.fspath(out)
    if not text.strip():
        raise OutputTargetError(f"{option} is empty; give the file or folder to write")
    path = Path(os.path.abspath(os.path.expanduser(text)))
    if path.name in ("", ".", ".."):
        raise OutputTargetError(
            f"{option} {text!r} names no file or folder of its own; give a new name such as "
            f"{os.path.join(text, 'report')!r}"
        )
    cwd = Path(os.path.abspath(os.getcwd()))
    if path == cwd or path in cwd.parents:
        raise OutputTargetError(
            f"{option} {text!r} is the current folder{'' if path == cwd else ' or holds it'}"
            f"; yieldwise writes a new folder and never replaces the one it runs in: give a "
            f"new name such as {os.path.join(text, 'report')!r}"
        )
    return path


# --------------------------------------------------------- placing outputs
def _renameat2_noreplace() -> Any:
    """libc's ``renameat2`` (Linux), or None where it does not exist."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]  # fmt: skip
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _renameat2_noreplace()
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def rename_no_replace(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, failing with FileExistsError if ``target`` exists.

    Atomic where the system offers it (Linux ``renameat2(RENAME_NOREPLACE)``); elsewhere
    an existence check just before the rename (the target lock keeps other yieldwise
    runs away; only an outside program could slip in between).
    """
    if _RENAMEAT2 is not None:
        status = _RENAMEAT2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target),
                            _RENAME_NOREPLACE)  # fmt: skip
        if status == 0:
            return
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, os.strerror(code), str(target))
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(source), None, str(target))
        # the file system does not support the flag: fall through
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    os.rename(source, target)


def make_parents(target: Path, option: str = "--out") -> list[Path]:
    """Create the folders ``target`` goes into; return those created, outermost first, so
    that a run that fails can remove them (:func:`remove_made`). A file where one of
    them should be is refused by name (:class:`OutputTargetError`)."""
    missing = []
    parent = target.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    if not parent.is_dir():
        raise OutputTargetError(
            f"{option} {target}: {parent} is a file, not a folder; choose another {option}"
        )
    made: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
            made.append(folder)
        except FileExistsError:  # appeared meanwhile: fine if a folder, go on inside it
            if not folder.is_dir():
                remove_made(made)
                raise OutputTargetError(
                    f"{option} {target}: {folder} is a file, not a folder; choose another {option}"
                ) from None
    return made


def remove_made(made: list[Path]) -> None:
    """Remove the folders :func:`make_parents` created, innermost first, where still
    empty (a failed run leaves no trace)."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            return


#: The random characters tempfile.mkstemp and mkdtemp append to a prefix.
_TEMP_RANDOM = 8


def partial_file(target: Path) -> Path:
    """A new, empty, uniquely named hidden file beside ``target`` to write into.

    Made with the permissions of an ordinary new file (mkstemp's are 0600), so that the
    target it becomes honours the umask as every other output does.
    """
    prefix = hidden_name(target.name, "partial-", _TEMP_RANDOM)
    fd, name = tempfile.mkstemp(prefix=prefix, dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    finally:
        os.close(fd)
    return Path(name)


def partial_folder(target: Path) -> Path:
    """A new, empty, uniquely named hidden folder beside ``target`` to write into.

    Made with the permissions of an ordinary new folder (mkdtemp's are 0700).
    """
    prefix = hidden_name(target.name, "partial-", _TEMP_RANDOM)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    folder.chmod(0o777 & ~_umask())
    return folder


def _umask() -> int:
    """The process's umask, read without changing it where the system allows."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (briefly process-wide)
    os.umask(mask)
    return mask


def place_file(partial: Path, target: Path, *, overwrite: bool) -> None:
    """Make the complete file ``partial`` the ``target``, atomically.

    Without ``overwrite`` a ``target`` that exists (it appeared while the file was
    written: the caller checked before) is never replaced: :class:`OutputTargetError`,
    and ``partial`` is removed.
    """
    try:
        if overwrite:
            os.replace(partial, target)
        else:
            rename_no_replace(partial, target)
    except FileExistsError:
        partial.unlink(missing_ok=True)
        raise OutputTargetError(
            f"{target}: appeared while this run was writing it; it was left as it is and "
            "nothing was written (pass --overwrite to replace it)"
        ) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


# ------------------------------------------------------------ the manifest
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path, version: str) -> None:
    """List every file of ``folder`` (sizes, SHA-256) in its manifest, written last."""
    files = sorted(p for p in folder.iterdir() if p.name != MANIFEST)
    if any(not p.is_file() for p in files):
        raise RuntimeError(f"{folder}: a report folder holds files only")  # pragma: no cover
    record = {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_VERSION,
        "yieldwise_version": version,
        "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "files": {p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)} for p in files},
    }
    (folder / MANIFEST).write_text(json.dumps(record, indent=1) + "\n")


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a yieldwise report folder, or None when ``folder`` has none.

    Raises :class:`OutputTargetError` for a manifest that is there but cannot be
    trusted (unreadable, another format, a newer version, or names that are not plain
    file names), so that nothing is deleted on its word.
    """
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        files = record["files"]
        fmt, version = record["format"], record["format_version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OutputTargetError(f"{path}: unreadable manifest ({exc})") from None
    known = (
        isinstance(version, int) and not isinstance(version, bool)
        and 1 <= version <= MANIFEST_VERSION
    )  # fmt: skip
    if fmt != MANIFEST_FORMAT or not known:
        raise OutputTargetError(
            f"{path}: format {fmt!r} version {version!r}, which this yieldwise (it reads "
            f"format {MANIFEST_FORMAT!r} versions 1 to {MANIFEST_VERSION}) does not know; "
            "it leaves the folder alone"
        )
    plain = isinstance(files, dict) and all(
        isinstance(n, str) and n not in ("", ".", "..") and "/" not in n and "\\" not in n
        and n != MANIFEST
        for n in files
    )  # fmt: skip
    if not plain:
        raise OutputTargetError(f"{path}: the manifest lists names that are not plain file names")
    return record


def check_listed(path: Path) -> None:
    """ValueError naming ``path`` unless the manifest of its folder (which must be there:
    :func:`read_manifest`) lists it with its size and SHA-256: a file the report wrote,
    as it wrote it."""
    folder = Path(path).parent
    manifest = read_manifest(folder)
    if manifest is None:
        raise ValueError(f"{path}: its folder has no {MANIFEST}")
    entry = manifest["files"].get(Path(path).name)
    if entry is None:
        raise ValueError(
            f"{path}: its folder's {MANIFEST} does not list it, so the report there did not "
            f"write it (it lists {sorted(manifest['files'])}); give a file the report wrote"
        )
    recorded = entry.get("sha256") if isinstance(entry, dict) else None
    found = _sha256(Path(path))
    if recorded != found:
        raise ValueError(
            f"{path}: differs from the file the report wrote (SHA-256 {found}; its "
            f"folder's {MANIFEST} records {recorded}): it was changed or replaced since. "
            "Restore it, or write the report again"
        )


#: The files a report wrote before reports carried a manifest (yieldwise 0.1.0 before
#: issue 17), besides ``transducer_<name>.nc``; see :func:`_legacy_manifest`.
_LEGACY_REPORT_FILES = frozenset(
    {"report.html", "summary.csv", "superiority.csv", "draws.nc", "config.lock.toml"}
)


def _legacy_manifest(folder: Path) -> dict[str, Any] | None:
    """A manifest for a report written before manifests existed, or None.

    Recognised only when the folder holds plain files and nothing but the names such a
    report wrote, ``config.lock.toml`` among them: then exactly those files are listed.
    """
    entries = list(folder.iterdir())
    names = {p.name for p in entries}
    ours = all(
        p.is_file() and not p.is_symlink()
        and (p.name in _LEGACY_REPORT_FILES
             or (p.name.startswith("transducer_") and p.name.endswith(".nc")))
        for p in entries
    )  # fmt: skip
    if not ours or "config.lock.toml" not in names:
        return None
    return {"files": dict.fromkeys(sorted(names))}


def check_replaceable(folder: Path, option: str = "--overwrite") -> dict[str, Any]:
    """The manifest of ``folder`` if yieldwise may replace it; else OutputTargetError.

    Replaceable: a folder with a valid manifest and nothing but the files it lists
    (a listed file may be missing), or a report written before manifests existed
    (:func:`_legacy_manifest`). Anything else in it is someone's, and stays: so is a
    listed name that is no longer a regular file (a folder or a link put in its place).
    """
    if not folder.is_dir():
        raise OutputTargetError(
            f"{folder}: exists and is not a folder; {option} replaces only an earlier "
            "yieldwise report folder, so choose another output"
        )
    manifest = read_manifest(folder)
    if manifest is None:
        manifest = _legacy_manifest(folder)
    if manifest is None:
        raise OutputTargetError(
            f"{folder}: exists and is not a yieldwise report folder (it has no {MANIFEST}); "
            f"{option} replaces only earlier reports, so choose another output"
        )
    others = sorted(p.name for p in folder.iterdir() if p.name not in manifest["files"]
                    and p.name != MANIFEST)  # fmt: skip
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise OutputTargetError(
            f"{folder}: holds an earlier yieldwise report and also {len(others)} entr"
            f"{'y' if len(others) == 1 else 'ies'} yieldwise did not write ({shown}); "
            f"{option} deletes only its own files, so move those elsewhere or choose "
            "another output"
        )
    replaced = sorted(
        name for name in manifest["files"]
        if os.path.lexists(folder / name) and not _regular_file(folder / name)
    )  # fmt: skip
    if replaced:
        shown = ", ".join(replaced[:5]) + (
            f" and {len(replaced) - 5} more" if len(replaced) > 5 else ""
        )
        raise OutputTargetError(
            f"{folder}: holds an earlier yieldwise report whose manifest lists {shown} as "
            f"file(s) yieldwise wrote, but they are now folders or links, which yieldwise "
            f"did not write; {option} deletes only its own files, so move those elsewhere "
            "or choose another output"
        )
    return manifest


def _regular_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _remove_listed(folder: Path, manifest: dict[str, Any]) -> None:
    """Delete the manifest's files and the manifest, then the folder if it is empty.

    A listed name that is no longer a file (:func:`check_replaceable` refused it; it
    appeared since) is left where it is, and so is the folder then, with a warning
    naming it: the new report is in place by now, so the run has succeeded."""
    import warnings

    for name in [*manifest["files"], MANIFEST]:
        path = folder / name
        if path.is_symlink() or path.is_file():  # a folder in its place is not ours
            with contextlib.suppress(OSError):
                path.unlink()
    with contextlib.suppress(OSError):  # not empty: something new appeared; it stays
        folder.rmdir()
    if os.path.lexists(folder):
        left = sorted(p.name for p in folder.iterdir())
        warnings.warn(
            f"{folder}: the earlier report was replaced by the new one, but this hidden "
            f"folder, where the earlier one was moved, still holds {left}, which yieldwise "
            "did not delete (it deletes only the files it wrote); look through it and "
            "remove it",
            stacklevel=3,
        )


def place_folder(partial: Path, target: Path, *, overwrite: bool) -> None:
    """Make the complete folder ``partial`` the ``target`` by one rename.

    An existing ``target`` is replaced only with ``overwrite`` and only when
    :func:`check_replaceable` allows it; the earlier report is moved aside first and
    deleted (its listed files only) once the new one is in place. Raises
    :class:`OutputTargetError` (``partial`` kept for the caller to remove) otherwise.
    """
    with contextlib.suppress(FileExistsError):
        rename_no_replace(partial, target)
        return
    if not overwrite:  # the caller checked that it did not exist when the run began
        raise OutputTargetError(
            f"{target}: appeared while this run was writing; it was left as it is and the "
            "new report was not written (pass --overwrite to replace an earlier report)"
        )
    manifest = check_replaceable(target)
    prefix = hidden_name(target.name, "replaced-", _TEMP_RANDOM)
    retired = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    os.rename(target, retired)  # onto the empty folder just made: atomic on POSIX
    try:
        rename_no_replace(partial, target)
    except BaseException:
        os.rename(retired, target)  # put the earlier report back
        raise
    _remove_listed(retired, manifest)


# ----------------------------------------------------------------- reading
#: pandas' compression by file name (``compression="infer"``, which a buffer cannot use)
_COMPRESSION = {
    ".tar": "tar",
    ".tar.gz": "tar",
    ".tar.bz2": "tar",
    ".tar.xz": "tar",
    ".gz": "gzip",
    ".bz2": "bz2",
    ".zip": "zip",
    ".xz": "xz",
    ".zst": "zstd",
}


def read_table(path: str | os.PathLike[str], *, label_columns: Sequence[str] = ()) -> Any:
    """A CSV table (pandas), the one loader of ``yieldwise fit`` and ``yieldwise report``.

    Column names must be unique: pandas renames a repeated one (``score``, ``score.1``),
    and a fit would then read whichever column kept the name. ``label_columns`` (the
    class column) keep their labels as the file writes them: read as numbers only when
    that loses nothing (``0``, ``1``), else as text, so that ``1`` and ``01`` stay two
    classes, ``007`` stays ``007`` and ``None`` or ``NA`` is a class, not a missing
    value (an empty cell is missing).

    The file is read from disk once (a pipe or a file being replaced gives one table);
    the header, the table and the label columns are parsed from that copy, as pandas
    reads a file by default (UTF-8, a byte-order mark skipped, compression by suffix).

    Raises FileNotFoundError for a missing file (the caller names the option or key that
    gave it) and ValueError naming the file for anything unreadable as CSV, and for a
    repeated column name.
    """
    import pandas as pd

    name = os.path.expanduser(os.fspath(path))  # as pandas reads a path
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", name):
        # pandas would fetch an address; one read of a local file is what is checked here
        raise ValueError(
            f"{path}: an address, not a file; download it and give the local file's path"
        )
    compression = next((c for end, c in _COMPRESSION.items() if name.lower().endswith(end)), None)
    try:
        with open(name, "rb") as handle:
            data = handle.read()

        def parse(**kwargs: Any) -> Any:
            return pd.read_csv(io.BytesIO(data), compression=compression, **kwargs)

        header = parse(header=None, nrows=1, dtype=str, keep_default_na=False)
        frame = parse()
        unnamed: dict[str, Any] = {}
        if not isinstance(frame.index, pd.RangeIndex):
            # the rows have more fields than the header names, so pandas took the first
            # for an index and shifted every column (labels read as scores, scores as the
            # empty last field); empty extra fields (a comma ending each row) are dropped
            unnamed = {"index_col": False, "usecols": range(len(frame.columns))}
            _check_extra_fields(path, parse(dtype=str, keep_default_na=False))
            frame = parse(**unnamed)
        texts = {
            column: parse(usecols=[column], dtype=str, keep_default_na=False,
                          **{k: v for k, v in unnamed.items() if k != "usecols"})[column]
            for column in label_columns
            if column in frame.columns
        }  # fmt: skip
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"{path}: no such file", str(path)) from None
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it as CSV ({exc})") from None
    names = [str(n) for n in header.iloc[0].tolist()] if len(header) else []
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(
            f"{path}: column name(s) {repeated} appear more than once in the header; "
            "rename them so that each column has its own name"
        )
    for column, text in texts.items():
        frame[column] = _labels_as_written(frame[column], text)
    return frame


def _check_extra_fields(path: Any, text: Any) -> None:
    """ValueError naming the file when its data rows have fields beyond the header's
    that are not all empty; ``text`` is the table as pandas parsed it, the first extra
    fields of each row taken for its index (so its last columns hold the rows' last
    fields)."""
    extra, named = text.index.nlevels, len(text.columns)
    tail = text.iloc[:, max(named - extra, 0) :].apply(lambda column: column.str.strip())
    filled = (tail != "").any(axis=1).to_numpy()
    if named >= extra and not filled.any():
        return
    row = int(filled.argmax()) + 1 if filled.any() else 1
    raise ValueError(
        f"{path}: its data rows have {named + extra} fields but its header names {named} "
        f"column(s) {[str(c) for c in text.columns]}; the fields past the header's are not "
        f"empty (first in data row {row}, line {row + 1} of the file). Name every column "
        "in the header, or remove the extra fields"
    )


def _labels_as_written(guessed: Any, text: Any) -> Any:
    """A class column as :func:`read_table` keeps it: pandas' guess where writing it back
    gives the file's text in every row, else the text itself; empty cells missing."""
    import numpy as np
    import pandas as pd

    # surrounding spaces are the file's layout ("0, 1"), not part of a label
    text = text.str.strip()
    empty = (text == "").to_numpy()
    present = ~empty
    written = guessed.astype(object).map(str).to_numpy()
    lossless = not guessed[present].isna().any() and bool(
        (written[present] == text.to_numpy(object)[present]).all()
    )
    if lossless:
        return guessed
    out = pd.Series(text.to_numpy(object), index=guessed.index, dtype=object)
    out[empty] = np.nan
    return out


def unusable_values(column: Any, *, outputs: bool) -> str | None:
    """What is wrong with a table's ``column`` (a pandas Series read by :func:`read_table`),
    or None: missing values anywhere, infinite values in a classifier's ``outputs`` too.
    The one wording for ``yieldwise fit`` and ``yieldwise report``: "has N missing
    value(s), first in data row R (line R + 1 of the file)", R counted from 1 after the
    header."""
    import numpy as np
    import pandas as pd

    bad, what = column.isna().to_numpy(), "missing"
    if not bad.any() and outputs and pd.api.types.is_numeric_dtype(column):
        bad, what = np.isinf(column.to_numpy(float)), "infinite"
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad)[0]) + 1
    first = f"first in data row {row} (line {row + 1} of the file)"
    rule = "; a classifier's outputs must be finite" if what == "infinite" else ""
    return f"has {int(bad.sum())} {what} value(s), {first}{rule}"
