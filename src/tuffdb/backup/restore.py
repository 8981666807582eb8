"""Restoring a data directory from a backup, or from an archive to a point in time.

1. Refuse a non-empty target directory.
2. Build the result beside it (``.<name>.restoring-<pid>``), so a restore that is killed
   leaves the target absent or empty, never half-written.
3. Fetch every file the backup (or the chosen base) lists, several at once, each fsynced,
   and verify its size and CRC-32C (a damaged or missing object is an error that names
   it); from an archive, replay the changes of the base's line in order up to the target
   time or log position: rounds append to logs, added files are fetched and verified,
   removed files are deleted; then fsync what was replayed.
4. Verify every store file's own structure and frame checksums (``verify.py``: no record
   is decoded, nothing is replayed). With ``check=True`` also open every store (its own
   recovery runs) and run its full check (events: deep). Derived indexes: the event
   store's index files are verified against their segments when it opens (rebuilt when
   they do not match); the document database's secondary and search indexes are never
   stored and are rebuilt from the records.
5. Rename the result into place (and fsync its parent directory).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuffdb.backup.archive import HEAD_KEY, decode_chunk, read_head
from tuffdb.backup.datadir import STORES, Keys, open_store, store_key_id
from tuffdb.backup.manifest import CHECK_FRAMES, MANIFEST_KEY, FileEntry, Manifest, decode
from tuffdb.backup.take import run_parallel
from tuffdb.backup.verify import verify_data_dir, verify_frames
from tuffdb.errors import (
    CorruptionError,
    NotFoundError,
    OperationalError,
    ProgrammingError,
    WrongKeyError,
)
from tuffdb.storage.files import fsync_dir
from tuffdb.storage.objstore import ObjectStore, open_target
from tuffdb.storage.shipping import Change, FeedLost, Mirror

if TYPE_CHECKING:
    from tuffdb.backup.progress import Progress


@dataclass
class Position:
    """``STORE/LOG:OFFSET``, e.g. ``events/log/00000000000000000000.log:81920``."""

    store: str
    name: str
    offset: int

    @classmethod
    def parse(cls, text: str) -> Position:
        path, sep, off = text.rpartition(":")
        store, slash, name = path.partition("/")
        if not sep or not slash or not name or not off.isdigit():
            raise ProgrammingError(f"--to-position {text!r}: expected STORE/LOG:OFFSET, e.g. "
                                   "events/log/00000000000000000000.log:81920")
        return cls(store, name, int(off))


@dataclass
class RestoreReport:
    source: str
    kind: str  # "backup" | "archive"
    stores: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    changes_applied: int = 0
    verified_files: int = 0


def _refuse_non_empty(data_dir: Path) -> None:
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise OperationalError(f"{data_dir} is not empty: restore into a new or empty directory "
                               "(nothing was changed)")


def fetch(target: ObjectStore, entry: FileEntry, dest: Path) -> int:
    """Download ``entry`` to ``dest`` (fsynced) and verify it: by a CRC-32C of its bytes,
    or (``check: "frames"``) every frame's CRC and the digest of its headers. Return its
    size. Errors name the object."""
    frames = entry.check == CHECK_FRAMES
    crc, size = target.get_file(entry.object, dest, crc=not frames)
    where = f"{target.url}/{entry.object}"
    if frames and size == entry.size:
        try:
            crc = verify_frames(dest, entry.trailer)
        except CorruptionError as exc:
            raise CorruptionError(f"{where} is damaged: {exc.reason}", path=where,
                                  offset=exc.offset) from None
    if size != entry.size or crc != entry.crc32c:
        what = "frame digest" if frames else "CRC-32C"
        raise CorruptionError(
            f"{where} is damaged: {size} bytes with {what} {crc:08x}, "
            f"the manifest says {entry.size} bytes with {entry.crc32c:08x}", path=where)
    return size


def fetch_all(target: ObjectStore, files: list[tuple[FileEntry, Path]], report: RestoreReport,
              progress: Progress | None = None) -> None:
    """:func:`fetch` each (entry, destination) on several threads; the directories they
    land in are fsynced once at the end."""
    dirs = {dest.parent for _, dest in files}
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    sizes = run_parallel(lambda e, d: fetch(target, e, d), files, progress,
                         [e.size for e, _ in files], background=False)
    for d in dirs:
        fsync_dir(d)
    report.files += len(sizes)
    report.bytes += sum(sizes)


def _check_keys(manifest: Manifest, keys: Keys) -> None:
    for name, st in manifest.stores.items():
        have = store_key_id(keys.for_store(name))
        if st.key_id != have:
            if not have:
                raise WrongKeyError(
                    f"store {name!r} in the backup is encrypted; pass its key "
                    "(--encryption-key-file, or --documents-key-file for the documents store)")
            raise WrongKeyError(f"store {name!r} in the backup was written with a different "
                                "encryption key" + (" (or none)" if st.key_id == 0 else ""))


def restore(source: str, data_dir: Path, *, keys: Keys, to_time_ns: int | None = None,
            to_position: Position | None = None, progress: Progress | None = None,
            check: bool = False) -> RestoreReport:
    """Rebuild ``data_dir`` from the backup or archive at ``source`` (see the module doc).

    :raises OperationalError: ``data_dir`` is not empty.
    :raises NotFoundError: nothing restorable at ``source`` (names what is missing).
    :raises CorruptionError: a damaged object (named), or a restored store fails its check.
    :raises WrongKeyError: a key is missing or wrong for an encrypted store.
    :raises VersionMismatchError: the backup is from a newer format version.
    """
    data_dir = Path(data_dir).absolute()
    _refuse_non_empty(data_dir)
    target = open_target(source)
    tmp = data_dir.parent / f".{data_dir.name}.restoring-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if target.head(MANIFEST_KEY) is not None:
            if to_time_ns is not None or to_position is not None:
                raise ProgrammingError(f"{target.url} is a backup: one restore point. "
                                       "--to-time/--to-position need an archive")
            report = RestoreReport(target.url, "backup")
            where = f"{target.url}/{MANIFEST_KEY}"
            manifest = decode(target.get(MANIFEST_KEY)[0], where)
            _check_keys(manifest, keys)
            if progress is not None:
                progress.total = sum(f.size for s in manifest.stores.values() for f in s.files)
            files = [(f, tmp / name / f.name) for name, st in manifest.stores.items()
                     for f in st.files]
            fetch_all(target, files + [(f, tmp / f.name) for f in manifest.extra], report,
                      progress)
            for name, st in manifest.stores.items():
                report.stores[name] = {"time_ns": st.time_ns, "positions": st.positions}
        elif target.head(HEAD_KEY) is not None:
            report = _restore_archive(target, tmp, keys, to_time_ns, to_position, progress)
        else:
            raise NotFoundError(f"{target.url}: no tuffdb backup or archive there (no "
                                f"{MANIFEST_KEY} nor {HEAD_KEY}; a backup that did not finish "
                                "has no manifest and cannot be restored from)")
        report.verified_files = verify_data_dir(tmp, keys)
        if check:
            check_stores(tmp, keys)
        if progress is not None:
            progress.finish()
        if data_dir.exists():
            data_dir.rmdir()  # empty (checked above)
        tmp.rename(data_dir)
        fsync_dir(data_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def check_stores(data_dir: Path, keys: Keys) -> None:
    """Open every store under ``data_dir`` (its recovery runs) and run its full check
    (events: deep); CorruptionError on a problem."""
    for name, kind in STORES.items():
        path = data_dir / name
        if not path.is_dir():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(kind, path, keys.for_store(name))
        try:
            problems = store.check(deep=True) if kind == "events" else store.check()
        finally:
            store.close()
        if problems:
            raise CorruptionError(f"the restored {name} store fails its check: "
                                  + "; ".join(problems[:5]), path=str(path))


# -- archives ------------------------------------------------------------------------------------
def line_changes(target: ObjectStore, store: str, line: str, after: int, through: int,
                 ) -> list[tuple[dict[str, Any], list[bytes]]]:
    """Changes of ``store``'s ``line`` with versions in ``(after, through]``, in order, each
    with its round data; CorruptionError when one is missing (a gap) or damaged."""
    out: list[tuple[dict[str, Any], list[bytes]]] = []
    expect = after + 1
    for key, _size in target.list(f"chunks/{store}/{line}/"):
        first, last = (int(x) for x in key.rsplit("/", 1)[1].split("-"))
        if last <= after or first > through:
            continue
        changes, data = decode_chunk(target.get(key)[0], f"{target.url}/{key}")
        at = 0
        for c in changes:
            datas = []
            for part in c.get("parts", []):
                datas.append(bytes(data[at : at + part[3]]))
                at += part[3]
            if after < c["v"] <= through:
                if c["v"] != expect:
                    raise CorruptionError(f"{target.url}/chunks/{store}/{line}: change "
                                          f"{expect} is missing (next found: {c['v']})",
                                          path=f"{target.url}/{key}")
                out.append((c, datas))
                expect += 1
    if expect <= through:
        raise CorruptionError(f"{target.url}/chunks/{store}/{line}: changes {expect}..{through} "
                              "are missing", path=f"{target.url}/chunks/{store}/{line}")
    return out


def _resolve_position(target: ObjectStore, head: Any, pos: Position,
                      ) -> tuple[dict[str, Any], int, int]:
    """(base entry, stop version in its line, time_ns) for a log position: the last round
    that leaves ``pos.name`` at or below ``pos.offset``."""
    for b in sorted(head.bases, key=lambda b: b["time_ns"], reverse=True):
        if pos.store not in b["lines"]:
            continue
        m = decode(target.get(b["object"])[0], f"{target.url}/{b['object']}")
        st = m.stores[pos.store]
        at = st.positions.get(pos.name)
        if at is not None and at > pos.offset:
            continue  # this base is past the position
        line = st.line
        info = head.lines[f"{pos.store}/{line}"]
        stop, stop_ns, seen = st.version, st.time_ns, at is not None
        for c, _d in line_changes(target, pos.store, line, st.version, info["through"]):
            ends = [p[2] for p in c.get("parts", []) if p[0] == pos.name]
            if ends and ends[-1] > pos.offset:
                break
            if ends or c.get("name") == pos.name:
                seen = True
            stop, stop_ns = c["v"], c["t"]
        if seen:
            return b, stop, stop_ns
    raise NotFoundError(f"{pos.store}/{pos.name}:{pos.offset} is not inside the archive's window "
                        f"at {target.url} (see tuffdb archive list)")


def _restore_archive(target: ObjectStore, tmp: Path, keys: Keys, to_time_ns: int | None,
                     to_position: Position | None, progress: Progress | None) -> RestoreReport:
    got = read_head(target)
    if got is None:
        raise NotFoundError(f"{target.url}/{HEAD_KEY} is missing")
    head = got[0]
    report = RestoreReport(target.url, "archive")
    stop_version: int | None = None
    if to_position is not None:
        base, stop_version, to_time_ns = _resolve_position(target, head, to_position)
    else:
        limit = time.time_ns() if to_time_ns is None else to_time_ns
        fitting = [b for b in head.bases if b["time_ns"] <= limit]
        if not fitting:
            first = min((b["time_ns"] for b in head.bases), default=None)
            raise NotFoundError(
                f"no restore point at or before that time in {target.url}: the window starts "
                f"at {_iso(first) if first else 'nothing (no base backup yet)'}")
        base = max(fitting, key=lambda b: b["time_ns"])
    manifest = decode(target.get(base["object"])[0], f"{target.url}/{base['object']}")
    _check_keys(manifest, keys)
    if progress is not None:
        progress.total = sum(f.size for s in manifest.stores.values() for f in s.files)
    fetch_all(target, [(f, tmp / name / f.name) for name, st in manifest.stores.items()
                       for f in st.files], report, progress)
    for name, st in manifest.stores.items():
        mirror = Mirror(tmp / name)
        mirror.held = dict(st.positions)
        mirror.version = st.version
        info = head.lines.get(f"{name}/{st.line}")
        through = info["through"] if info else st.version
        if to_position is not None and name == to_position.store:
            through = min(through, stop_version)  # type: ignore[type-var]
        last_ns = st.time_ns
        for c, datas in line_changes(target, name, st.line, st.version, through):
            if to_time_ns is not None and c["t"] > to_time_ns and not (
                    to_position is not None and name == to_position.store):
                break
            _apply(target, mirror, c, datas, tmp / name, report)
            last_ns = c["t"]
        _sync_replayed(tmp / name, mirror)
        report.stores[name] = {"time_ns": last_ns, "positions": dict(mirror.held),
                               "base": base["object"], "line": st.line}
    return report


def _sync_replayed(store_dir: Path, mirror: Mirror) -> None:
    """fsync what replaying wrote (a Mirror does not): the logs it appended to and every
    directory it created or renamed into."""
    for name in mirror.held:
        fd = os.open(store_dir / name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for d in [store_dir, *(p for p in store_dir.rglob("*") if p.is_dir())]:
        fsync_dir(d)


def _apply(target: ObjectStore, mirror: Mirror, c: dict[str, Any], datas: list[bytes],
           store_dir: Path, report: RestoreReport) -> None:
    pinned = None
    if c["kind"] == "added":
        pinned = store_dir.parent / f".fetch-{c['v']}"
        report.bytes += fetch(target, FileEntry(c["name"], c["size"], c["crc32c"], "file",
                                                c["object"]), pinned)
        report.files += 1
    parts = tuple((p[0], p[1], p[2], d) for p, d in zip(c.get("parts", []), datas, strict=True))
    try:
        mirror.apply(Change(c["v"], c["t"], c["kind"], parts, c.get("name", ""), pinned))
    except FeedLost as exc:
        raise CorruptionError(f"{target.url}: {exc}", path=target.url) from None
    finally:
        if pinned is not None:
            with contextlib.suppress(FileNotFoundError):
                pinned.unlink()
    report.changes_applied += 1


def _iso(ns: int | None) -> str:
    if ns is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns / 1e9)) + f".{ns % 10**9 // 10**6:03d}Z"


def describe(source: str) -> dict[str, Any]:
    """What ``tuffdb archive list`` shows: restore points, the window, the lag."""
    target = open_target(source)
    got = read_head(target)
    if got is None:
        raise NotFoundError(f"{target.url}: no archive there ({HEAD_KEY} is missing)")
    head = got[0]
    now = time.time_ns()
    bases = sorted(head.bases, key=lambda b: b["time_ns"])
    current = [v for v in head.lines.values() if v["epoch"] == head.epoch]
    through = min((v["through_ns"] for v in current), default=None)
    start = bases[0]["time_ns"] if bases else None
    return {
        "archive": target.url, "epoch": head.epoch, "writer": head.writer,
        "updated": _iso(head.updated_ns), "retention_s": head.retention_s,
        "window": {"from": _iso(start), "to": _iso(through)},
        "lag_s": round((now - through) / 1e9, 3) if through else None,
        "base_backups": [{"time": _iso(b["time_ns"]), "object": b["object"],
                          "versions": b.get("versions", {})} for b in bases],
        "lines": [{"store": v["store"], "line": v["line"], "through_version": v["through"],
                   "through": _iso(v["through_ns"]), "chunks": v.get("chunks", 0)}
                  for v in head.lines.values()],
    }
