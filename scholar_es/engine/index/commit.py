"""Generation-numbered, checksummed segment files and the commit point that names them.

Follows Lucene's commit protocol (``SegmentInfos`` / ``IndexWriter.commit``, see
docs/storage.md): derived files are written once under new names and never modified; a
commit point ``segments_<N>.json`` (a header line with the CRC32 and size of the JSON body
that follows) -- written last, to a temporary file that is fsynced and
then atomically renamed -- lists every file of generation ``N`` with its size and CRC32 (what
Lucene's ``CodecUtil`` footer checks) and the SQLite state the files reflect. A reader takes
the highest commit point whose own checksum and every listed file verify; anything missing,
truncated or mismatching is reported as ``None`` so the caller rebuilds from SQLite.

A generation's new arrays are stored in one compound file ``_<N>.seg`` (Lucene's compound file
format, ``.cfs``, has the same purpose: few files, few fsyncs), each array an ``.npy`` blob at
an offset the commit point records with its size and CRC32. A commit point lists every file
its state needs: a full save writes one base file; a delta save writes only a small new file
and lists the unchanged files of the previous commit point again (``keep``). File names are
numbers only, never field or index names. Writers of one folder (threads or processes) are
serialized by an ``fcntl`` lock on ``write.lock``; a commit removes older commit points and
every data file the new one does not list (Lucene's ``IndexFileDeleter``). Files are opened
with memory mapping, read-only; a mapping stays valid after its file is unlinked, so a loaded
snapshot never needs the name again (a reader that loses a race to the cleanup retries).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scholar_es.engine.index.array_stats import ArrayStats

log = logging.getLogger("scholar_es.engine")

try:  # ISA-L (python-isal): zlib's CRC-32, 8-10 GB/s against zlib's 2.7 on this machine's pages
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - a platform without isal's wheels: the same values, slower
    from zlib import crc32

FORMAT = "scholar-es-segments/1"
_COMMIT_RE = re.compile(r"^segments_(\d+)\.json$")
_FILE_RE = re.compile(r"^_(\d+)\.seg$")
#: a commit point lists at most this many files, each at most this large (sanity bounds)
MAX_FILES = 1_000_000


def fault(point: str) -> None:
    """Fault-injection hook: ``SCHOLAR_ES_CRASH_AT=<point>[:<n>]`` kills the process with SIGKILL
    the n-th time (default 1st) the save reaches ``point``. Tests use it to crash a save at each
    step; it costs one environment lookup when unset."""
    spec = os.environ.get("SCHOLAR_ES_CRASH_AT")
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    count = _FAULT_COUNTS.get(point, 0) + 1
    _FAULT_COUNTS[point] = count
    if count >= int(nth or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


_FAULT_COUNTS: dict[str, int] = {}


@contextlib.contextmanager
def write_lock(folder: Path, name: str = "write.lock") -> Iterator[None]:
    """Exclusive lock on ``folder/<name>`` (Lucene's ``write.lock``) across processes."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX: threads are still serialized by callers
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def generations(folder: Path) -> list[int]:
    """Generation numbers of the commit points in ``folder``, highest first."""
    return sorted((int(m.group(1)) for n in _names(folder) if (m := _COMMIT_RE.match(n))), reverse=True)


# Offsets of the arrays in a data file are multiples of this. A file is read into one bytes object
# (16-byte aligned data) and an .npy header is a multiple of 64 bytes, so every array's data lands
# 16-byte aligned: float32 BLAS kernels on an 8-byte aligned view of the vectors ran ~1.6x slower
# (bench: 100k x 384 matrix-vector product 8.4 ms vs 5.1 ms). Readers follow the recorded offsets,
# so files written before (unpadded) read the same.
ALIGN = 64


class StaleCommit(Exception):
    """A delta was prepared against a commit point that is no longer the newest one."""


def write_commit(
    folder: Path,
    arrays: list[np.ndarray],
    meta: dict,
    keep: list[dict] | None = None,
    based_on: int | None = None,
) -> tuple[int, list[dict]]:
    """Write ``arrays`` as a new data file plus a commit point listing it after the files of
    ``keep`` (entries of an earlier commit point); returns (generation, listed files).

    ``meta`` (JSON) is stored in the commit point: what the arrays mean and which SQLite
    state they reflect. With ``based_on`` (a delta), the newest commit point must still be that
    generation and every kept file must still be there, else ``StaleCommit`` (another writer
    committed since: the caller writes a full generation instead). Steps, each a
    fault-injection point: data file half written (``file_half``), written and fsynced
    (``files``), commit point written to a temporary name and fsynced (``commit_tmp``), renamed
    into place (``commit``), unlisted files removed (``cleanup``).
    """
    keep = list(keep or [])
    with write_lock(folder):
        newest = (generations(folder) or [0])[0]
        if based_on is not None and (
            newest != based_on or not all((folder / f["name"]).exists() for f in keep)
        ):
            raise StaleCommit(f"generation {based_on} is no longer the newest ({newest})")
        gen = newest + 1
        name = f"_{gen}.seg"
        entries, offset = [], 0
        with _removed_on_failure(folder / name), open(folder / name, "wb") as f:
            for i, arr in enumerate(arrays):
                data = _npy_bytes(arr)
                pad = -offset % ALIGN
                if pad:  # each array at an aligned offset: its data is read back SIMD-aligned
                    f.write(b"\0" * pad)
                    offset += pad
                f.write(data)
                entry: dict = {"offset": offset, "size": len(data), "crc32": crc32(data)}
                facts = ArrayStats.of(arr)
                if facts is not None:  # what the open's range checks read (engine/index/array_stats.py)
                    entry["facts"] = facts.to_json()
                entries.append(entry)
                offset += len(data)
                if i == len(arrays) // 2:
                    f.flush()
                    fault("file_half")
            f.flush()
            os.fsync(f.fileno())
        files = [*keep, {"name": name, "size": offset, "arrays": entries}]
        fault("files")
        body = json.dumps({"format": FORMAT, "generation": gen, "files": files, "meta": meta}).encode()
        header = json.dumps({"crc32": crc32(body), "size": len(body)}).encode()
        doc = header + b"\n" + body
        tmp = folder / f"segments_{gen}.json.tmp"
        with _removed_on_failure(tmp, folder / name), open(tmp, "wb") as f:
            f.write(doc)
            f.flush()
            os.fsync(f.fileno())
        fault("commit_tmp")
        os.replace(tmp, folder / f"segments_{gen}.json")
        _fsync_dir(folder)
        fault("commit")
        _remove_unlisted(folder, gen, {f["name"] for f in files})
        fault("cleanup")
        return gen, files


@contextlib.contextmanager
def _removed_on_failure(*paths: Path) -> Iterator[None]:
    """Remove ``paths`` when the block fails (a full disk, say): a save that fails before its
    commit point is in place leaves the folder as it found it, not holding a partial file that
    keeps the disk full until the next save succeeds."""
    try:
        yield
    except BaseException:
        for path in paths:
            with contextlib.suppress(OSError):
                os.remove(path)
        raise


def _remove_unlisted(folder: Path, keep: int, listed: set[str]) -> None:
    """Delete every commit point but ``keep``, every data file it does not list, and temporary
    files (Lucene's ``IndexFileDeleter`` with its default keep-only-last-commit policy)."""
    for name in os.listdir(folder):
        if (m := _COMMIT_RE.match(name)) is not None:
            stale = int(m.group(1)) != keep
        elif _FILE_RE.match(name):
            stale = name not in listed
        else:
            stale = name.endswith(".tmp")
        if stale or name == "manifest.json" or name.endswith(".npy"):  # .npy, manifest.json: the old cache
            with contextlib.suppress(OSError):
                os.remove(folder / name)


class CorruptCommit(Exception):
    """A commit point or one of its files is missing, truncated or fails its checksum."""


@dataclass
class Commit:
    """A verified commit point: its arrays (all files, in listed order), meta and file list, and
    per array the facts its writer recorded (None: not recorded, or not a 1-D integer array)."""

    gen: int
    arrays: list[np.ndarray]
    meta: dict
    files: list[dict]
    stats: list[ArrayStats | None] = field(default_factory=list)


def read_commit(folder: Path) -> tuple[int, list[np.ndarray], dict] | None:
    """(generation, arrays, meta) of the newest commit point that verifies, else None."""
    found = open_commit(folder)
    return None if found is None else (found.gen, found.arrays, found.meta)


def open_commit(folder: Path) -> Commit | None:
    """The newest commit point that verifies, else None.

    Every listed file is mapped and checked against the size and CRC32 its commit point
    records before it is parsed; a failure is logged and the next older commit point (if
    any survived) is tried. ``None`` means: rebuild from SQLite.
    """
    tried: set[int] = set()
    for _ in range(3):  # a concurrent commit may remove what was being read: look again
        gens = [g for g in generations(folder) if g not in tried]
        if not gens:
            break
        for gen in gens:
            tried.add(gen)
            try:
                return Commit(gen, *_read_generation(folder, gen))
            except (CorruptCommit, KeyError, TypeError, ValueError) as e:  # the last three: malformed entries
                log.warning(
                    "segment cache %s generation %d is unusable (%s); rebuilding from SQLite", folder, gen, e
                )
    if not tried and any(_FILE_RE.match(n) for n in _names(folder)):
        log.warning("segment cache %s has data files but no commit point; rebuilding from SQLite", folder)
    return None


def peek_meta(folder: Path) -> dict | None:
    """The ``meta`` of the newest commit point whose own checksum matches, without mapping or
    verifying its data files (what SQLite state it claims to reflect), else None."""
    for gen in generations(folder):
        try:
            header, _, body = (folder / f"segments_{gen}.json").read_bytes().partition(b"\n")
            check = json.loads(header)
            if len(body) != check["size"] or crc32(body) != check["crc32"]:
                continue
            meta = json.loads(body).get("meta")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if isinstance(meta, dict):
            return meta
    return None


def _map(path: Path, size: int) -> memoryview:
    """The first ``size`` bytes of ``path``, memory-mapped read-only (pages are read when touched;
    the mapping outlives an unlink of the file). Raises CorruptCommit when the file has another size."""
    try:
        with open(path, "rb") as fh:
            actual = os.fstat(fh.fileno()).st_size
            if actual != size:
                raise CorruptCommit(f"file {path.name} has {actual} bytes, the commit point says {size}")
            if size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
    except OSError as e:
        raise CorruptCommit(f"file {path.name} unreadable: {e.strerror or e}") from None


#: bytes checksummed per step; each step's pages are then released from the process (below)
_CRC_STEP = 32 * 1024 * 1024


def _crc32(data: memoryview, offset: int, size: int) -> int:
    """CRC32 of ``data[offset:offset + size]``, releasing each checked step's pages from this
    process afterwards (``madvise(MADV_DONTNEED)`` on the read-only file mapping: the bytes stay in
    the page cache and a later read maps them again). Verifying every array touches every page of
    the commit point; without the release all of them stay in the process's resident set (a 4 GB
    commit point at 1M chunks made a fresh process's peak RSS 10.5 GB), though a search reads few."""
    mm = data.obj if isinstance(data.obj, mmap.mmap) else None
    advise = getattr(mmap, "MADV_DONTNEED", None) if mm is not None else None
    crc, pos, end = 0, offset, offset + size
    while pos < end:
        stop = min(pos + _CRC_STEP, end)
        crc = crc32(data[pos:stop], crc)
        if advise is not None and mm is not None:
            lo = pos - pos % mmap.PAGESIZE
            try:
                mm.madvise(advise, lo, stop - lo)
            except OSError:  # advice only: a platform that refuses it keeps the pages
                advise = None
        pos = stop
    return crc


def _npy_view(blob: memoryview) -> np.ndarray:
    """The array of an ``.npy`` blob as a read-only view of the bytes already read (no copy:
    opening is one read and one CRC pass; read-only suits an immutable segment)."""
    head = io.BytesIO(bytes(blob[: 65536 + 16]))
    version = np.lib.format.read_magic(head)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(head)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(head)
    if dtype.hasobject:
        raise ValueError("object arrays are never stored")
    count = int(np.prod(shape, dtype=np.int64))
    if count * dtype.itemsize != len(blob) - head.tell():
        raise ValueError(f"{len(blob) - head.tell()} bytes of data for shape {shape} of {dtype}")
    arr = np.frombuffer(blob, dtype=dtype, count=count, offset=head.tell())
    return arr.reshape(shape, order="F" if fortran else "C")


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _read_generation(
    folder: Path, gen: int
) -> tuple[list[np.ndarray], dict, list[dict], list[ArrayStats | None]]:
    try:
        header, _, body = (folder / f"segments_{gen}.json").read_bytes().partition(b"\n")
        check = json.loads(header)
        if len(body) != check["size"] or crc32(body) != check["crc32"]:
            raise CorruptCommit("commit point checksum mismatch")
        entry = json.loads(body)
        if entry.get("format") != FORMAT or entry.get("generation") != gen:
            raise CorruptCommit("commit point of another format or generation")
        files = entry["files"]
        if not isinstance(files, list) or len(files) > MAX_FILES:
            raise CorruptCommit("commit point file list is malformed")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CorruptCommit(f"commit point unreadable: {type(e).__name__}: {e}") from None
    arrays: list[np.ndarray] = []
    stats: list[ArrayStats | None] = []
    for f in files:
        name = f.get("name", "") if isinstance(f, dict) else ""
        m = _FILE_RE.match(name)
        if m is None or int(m.group(1)) > gen:  # files of this or an earlier generation
            raise CorruptCommit(f"commit point names an unexpected file [{name}]")
        data = _map(folder / name, int(f["size"]))
        for i, a in enumerate(f["arrays"]):
            blob = data[a["offset"] : a["offset"] + a["size"]]
            if len(blob) != a["size"] or _crc32(data, a["offset"], a["size"]) != a["crc32"]:
                raise CorruptCommit(f"array {i} of file {name} fails its CRC32 checksum")
            try:
                arr = _npy_view(blob)
            except Exception as e:  # noqa: BLE001 -- whatever numpy's header parser raises
                raise CorruptCommit(f"array {i} of file {name} is not a valid array: {e!r:.200}") from None
            # the facts the writer recorded describe exactly these bytes once their CRC matches;
            # a commit point written before they were recorded has none (computed at load)
            facts = ArrayStats.from_json(a["facts"]) if "facts" in a else None
            if facts is not None and (arr.ndim != 1 or arr.dtype.kind not in "iu"):
                raise CorruptCommit(f"array {i} of file {name} has facts but is not a 1-D integer array")
            arrays.append(arr)
            stats.append(facts)
    return arrays, entry["meta"], files, stats


__all__ = [
    "Commit",
    "CorruptCommit",
    "StaleCommit",
    "fault",
    "generations",
    "open_commit",
    "peek_meta",
    "read_commit",
    "write_commit",
    "write_lock",
]
