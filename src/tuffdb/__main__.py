"""The ``tuffdb`` command (also ``python -m tuffdb``).

    tuffdb serve [options]     run the server (see ``tuffdb serve --help``)
    tuffdb check PATH          verify a store; exit 1 if problems were found
    tuffdb stat PATH           print a store's statistics as JSON
    tuffdb compact PATH        compact a store now
    tuffdb backup DATA_DIR DEST         back up a data directory (offline) to a directory/s3://
    tuffdb backup --server URL DEST     the same from a running server (its admin endpoint)
    tuffdb restore SRC DATA_DIR [--to-time T | --to-position STORE/LOG:OFFSET]
    tuffdb archive list URL    restore points, window and lag of an archive
    tuffdb version             print "tuffdb <version>"

Exit codes: 0 success, 1 problems found or the store could not be opened, 2 usage
or configuration error. ``check``/``stat``/``compact`` must not run against a store
a live server has open (the store's lock refuses it with a clear message).
"""

# ruff: noqa: T201 (a command-line tool prints its results)
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from tuffdb import _native
from tuffdb._version import __version__
from tuffdb.errors import Error, LockTimeout, WrongKeyError
from tuffdb.server.config import ConfigError, ServeConfig, add_serve_arguments, encryption_key

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="tuffdb", description="tuffdb: KV, events, documents.")
    parser.add_argument("--version", action="version", version=f"tuffdb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = sub.add_parser("serve", help="run the server",
                           description="Options come from flags, then TUFFDB_* environment "
                           "variables, then the --config TOML file, then defaults.")
    add_serve_arguments(serve)
    serve.add_argument("--print-config", action="store_true",
                       help="print the effective configuration as JSON and exit")
    for name, help_ in (("check", "verify checksums, index and hint files; exit 1 on problems"),
                        ("stat", "print store statistics as JSON"),
                        ("compact", "compact the store now")):
        cmd = sub.add_parser(name, help=help_, description=help_)
        cmd.add_argument("path", metavar="PATH", type=Path, help="store directory")
        cmd.add_argument("--encryption-key-file", metavar="FILE", type=Path,
                         help="key of an encrypted store (or env TUFFDB_ENCRYPTION_KEY)")
    backup = sub.add_parser("backup", help="back up a data directory or a running server",
                            description="Copy every store (consistently, per store) and a "
                            "manifest with checksums to DEST: a new or empty directory or "
                            "s3://bucket/prefix. Secrets (documents.key, ekodb_admin_key) are "
                            "never copied: keep them yourself.")
    backup.add_argument("data_dir", metavar="DATA_DIR", type=Path, nargs="?",
                        help="the server's data directory (the server must be stopped)")
    backup.add_argument("dest", metavar="DEST", help="directory or s3://bucket/prefix")
    backup.add_argument("--server", metavar="URL",
                        help="back up a running server through its admin endpoint "
                        "(e.g. http://127.0.0.1:9090); DEST is then the server's view")
    backup.add_argument("--token", metavar="SECRET",
                        help="with --server: the server's --api-key or --requirepass, which "
                        "POST /backup needs when the server has one (default: "
                        "TUFFDB_API_KEY, else TUFFDB_REQUIREPASS)")
    backup.add_argument("--link", action="store_true",
                        help="hard-link immutable files into a directory DEST on the same "
                        "file system instead of copying them")
    backup.add_argument("--max-rate", metavar="MB/S", type=float,
                        help="copy at most this many MB per second (bounds what a backup "
                        "takes from the writers' disk)")
    backup.add_argument("--no-pace", dest="pace", action="store_false",
                        help="with --server: do not slow the copy down when the server's "
                        "commits slow (by default they stay within ~1.5x of their fsync "
                        "latency alone)")
    _key_args(backup)
    restore = sub.add_parser("restore", help="rebuild a data directory from a backup or archive",
                             description="SRC is a backup or an archive (directory or s3://). "
                             "DATA_DIR must not exist or be empty.")
    restore.add_argument("source", metavar="SRC")
    restore.add_argument("data_dir", metavar="DATA_DIR", type=Path)
    target = restore.add_mutually_exclusive_group()
    target.add_argument("--to-time", metavar="T",
                        help="ISO 8601 time (2026-12-03T17:40:00Z) or Unix seconds (archives)")
    target.add_argument("--to-position", metavar="STORE/LOG:OFFSET",
                        help="a log position, e.g. events/log/00000000000000000000.log:81920")
    restore.add_argument("--check", action="store_true",
                         help="also open every restored store and run its full check (as "
                         "tuffdb check does) before putting the directory in place")
    _key_args(restore)
    archive = sub.add_parser("archive", help="inspect a continuous archive")
    archive.add_argument("action", choices=("list",))
    archive.add_argument("url", metavar="URL")
    cluster = sub.add_parser("cluster", help="show a replicated cluster's nodes",
                             description="Each node's role, epoch, durable position (LSN), "
                             "lag behind the leader and health, as etcd has them.")
    cluster.add_argument("action", choices=("status",))
    cluster.add_argument("--etcd", required=True, metavar="URLS", help="etcd client URLs")
    cluster.add_argument("--cluster", required=True, metavar="NAME", help="the cluster's name")
    cluster.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.add_parser("version", help="print the version")
    native = sub.add_parser("native", help="compile the hot modules (mypyc), or show the build",
                            description="'build' compiles the hot modules with mypyc into a "
                            "build used by later runs; 'status' says whether one is in use.")
    native.add_argument("action", choices=("build", "status"))
    native.add_argument("-v", "--verbose", action="store_true", help="show the compiler output")
    return parser, sub.choices


def _key_args(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--encryption-key-file", metavar="FILE", type=Path,
                     help="the server's key (or env TUFFDB_ENCRYPTION_KEY)")
    cmd.add_argument("--documents-key-file", metavar="FILE", type=Path,
                     help="the documents store's own key (DATA_DIR/documents.key) when the "
                     "server runs without --encryption-key-file")


def _keys(args: argparse.Namespace, parser: argparse.ArgumentParser, data_dir: Path | None) -> Any:
    from tuffdb.backup.datadir import Keys  # noqa: PLC0415

    try:
        configured = encryption_key(ServeConfig(encryption_key_file=args.encryption_key_file))
    except ConfigError as exc:
        parser.error(str(exc))
    if data_dir is None:
        docs = args.documents_key_file.read_bytes() if args.documents_key_file else None
        return Keys(configured, docs)
    return Keys.of_data_dir(data_dir, configured, args.documents_key_file)


def _parse_time(text: str) -> int:
    """ISO 8601 (a time without zone is UTC) or Unix seconds -> ns since the epoch."""
    from datetime import UTC, datetime  # noqa: PLC0415

    try:
        return int(float(text) * 1e9)
    except ValueError:
        pass
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1e9)


def _backup(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from tuffdb.backup import datadir  # noqa: PLC0415
    from tuffdb.backup.progress import stderr_progress  # noqa: PLC0415
    from tuffdb.backup.take import STAGING_DIR, take_backup  # noqa: PLC0415
    from tuffdb.storage.objstore import open_target  # noqa: PLC0415

    if args.server:
        if args.data_dir is not None:
            parser.error("give DATA_DIR or --server URL, not both")
        token = (args.token or os.environ.get("TUFFDB_API_KEY")
                 or os.environ.get("TUFFDB_REQUIREPASS"))
        return _post_backup(args.server, args.dest, args.link, args.max_rate, args.pace, token)
    if args.data_dir is None:
        parser.error("DATA_DIR is required (or --server URL)")
    data_dir: Path = args.data_dir
    names = datadir.stores_in(data_dir) if data_dir.is_dir() else []
    if not names:
        parser.error(f"{data_dir} is not a tuffdb data directory (no kv/, events/ or documents/)")
    keys = _keys(args, parser, data_dir)
    held: list[Any] = []
    try:
        target = open_target(args.dest)
        datadir.refuse_overlap(data_dir, target, "the backup destination")
        sources, held = datadir.locked_sources(data_dir)
        _check_backup_keys(sources, keys)
        manifest = take_backup(sources, target,
                               data_dir / STAGING_DIR, extra=datadir.extra_files(data_dir),
                               link=args.link, progress=stderr_progress("backup", 0),
                               max_bytes_per_s=args.max_rate * 1e6 if args.max_rate else None)
    except LockTimeout as exc:
        print(f"tuffdb: {data_dir} is in use by a running server ({exc}); back it up with "
              "tuffdb backup --server URL DEST", file=sys.stderr)
        return 1
    except Error as exc:
        print(f"tuffdb: backup failed: {exc}", file=sys.stderr)
        return 1
    finally:
        for src in held:
            src.release()
    print(json.dumps(_summary(manifest, args.dest)))
    _warn_secrets(data_dir, keys)
    return 0


def _check_backup_keys(sources: list[Any], keys: Any) -> None:
    """A key given for an offline backup must be the one the store's files carry (the
    backup itself copies the encrypted bytes and needs no key)."""
    from tuffdb.backup.datadir import store_key_id  # noqa: PLC0415

    for src in sources:
        given = keys.for_store(src.name)
        if given is not None and src.key_id and store_key_id(given) != src.key_id:
            raise WrongKeyError(f"store {src.name!r} was written with a different encryption "
                                "key than the one given")


def _summary(manifest: Any, dest: str) -> dict[str, Any]:
    return {"dest": dest, "time_ns": manifest.time_ns,
            "stores": {n: {"time_ns": s.time_ns, "positions": s.positions, "files": len(s.files),
                           "bytes": sum(f.size for f in s.files)}
                       for n, s in manifest.stores.items()}}


def _warn_secrets(data_dir: Path, keys: Any) -> None:
    if keys.configured is None and (data_dir / "documents" ).is_dir():
        print(f"note: the documents store is encrypted with {data_dir}/documents.key, which "
              "backups never contain: keep a copy of it; restore needs it "
              "(--documents-key-file)", file=sys.stderr)


def _post_backup(server: str, dest: str, link: bool, max_rate: float | None,
                 pace: bool = True, token: str | None = None) -> int:
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    body = json.dumps({"dest": dest, "link": link, "max_mb_per_s": max_rate,
                       "pace": pace}).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(server.rstrip("/") + "/backup", data=body, method="POST",
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=24 * 3600) as resp:  # noqa: S310 (operator URL)
            print(resp.read().decode().strip())
            return 0
    except urllib.error.HTTPError as exc:
        print(f"tuffdb: the server refused the backup: {exc.code} {exc.read().decode().strip()}",
              file=sys.stderr)
    except (urllib.error.URLError, OSError) as exc:
        print(f"tuffdb: cannot reach {server}: {exc}", file=sys.stderr)
    return 1


def _restore(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from tuffdb.backup.progress import stderr_progress  # noqa: PLC0415
    from tuffdb.backup.restore import Position, restore  # noqa: PLC0415

    keys = _keys(args, parser, None)
    try:
        to_time = _parse_time(args.to_time) if args.to_time else None
    except ValueError:
        parser.error(f"--to-time {args.to_time!r}: expected ISO 8601 or Unix seconds")
    try:
        position = Position.parse(args.to_position) if args.to_position else None
        report = restore(args.source, args.data_dir, keys=keys, to_time_ns=to_time,
                         to_position=position, progress=stderr_progress("restore", 0),
                         check=args.check)
    except Error as exc:
        print(f"tuffdb: restore failed: {exc}", file=sys.stderr)
        return 1
    if keys.documents is not None and (args.data_dir / "documents").is_dir():
        from tuffdb.backup.datadir import DOCUMENTS_KEY_FILE  # noqa: PLC0415

        path = args.data_dir / DOCUMENTS_KEY_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(keys.documents)
    print(json.dumps({"restored": str(args.data_dir), "from": report.source, "kind": report.kind,
                      "files": report.files, "bytes": report.bytes,
                      "changes_applied": report.changes_applied, "stores": report.stores}))
    return 0


def _archive(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    del parser
    from tuffdb.backup.restore import describe  # noqa: PLC0415

    try:
        print(json.dumps(describe(args.url), indent=2))
    except Error as exc:
        print(f"tuffdb: {exc}", file=sys.stderr)
        return 1
    return 0


def _store_kind(path: Path) -> str:
    """``"kv"``, ``"events"`` or ``"documents"``, from the first tuffdb file under ``path``.

    Every tuffdb file starts with a segment header whose file-kind byte says what wrote
    it (``docs/format/segment.md``), so no separate marker file is needed. A directory
    with no tuffdb file yet is treated as a KV store.
    """
    from tuffdb._format import MAGIC_PREFIX  # noqa: PLC0415
    from tuffdb._format.segment import FILE_KIND_OFFSET, FileKind  # noqa: PLC0415

    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        with file.open("rb") as f:
            head = f.read(FILE_KIND_OFFSET + 1)
        if head.startswith(MAGIC_PREFIX) and len(head) > FILE_KIND_OFFSET:
            kind = head[FILE_KIND_OFFSET]
            if kind in (FileKind.EVENT_LOG, FileKind.EVENT_INDEX):
                return "events"
            return "documents" if kind == FileKind.DOCUMENT else "kv"
    return "kv"


class _EventStoreView:
    """check/stats/compact over an EventStore, which has only check() of its own."""

    def __init__(self, store: Any, path: Path) -> None:
        self.store = store
        self.path = path

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def check(self) -> list[str]:
        problems: list[str] = self.store.check()
        return problems

    def stats(self) -> dict[str, Any]:
        return {"kind": "events", "head": self.store.head(), "bytes": _dir_bytes(self.path),
                "recovery_bytes_dropped": getattr(self.store.recovery, "bytes_dropped", 0)}

    def compact(self) -> None:
        print("note: event stores are append-only; there is nothing to compact", file=sys.stderr)

    def sync(self) -> None:
        """Appends are fsynced before they return; nothing is pending."""


def _open_store(path: Path, key: bytes | None) -> Any:
    """Open the store at ``path`` for check/stat/compact: the one place that knows store kinds.

    :raises ImportError: when that kind of store is not part of this build.
    """
    kind = _store_kind(path)
    if kind == "events":
        from tuffdb.events.store import EventStore  # noqa: PLC0415

        return _EventStoreView(EventStore.open(path, encryption_key=key), path)
    if kind == "documents":
        raise ImportError("document directories are not supported by check/stat/compact yet")
    from tuffdb.kv.store import KVStore  # noqa: PLC0415 (keeps `tuffdb version` fast)

    return KVStore.open(path, encryption_key=key)


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _store_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    path: Path = args.path
    if not path.is_dir():
        parser.error(f"{path} is not a directory (PATH is a store directory, "
                     "e.g. ./tuffdb-data/kv)")
    stores = [p.name for p in (path / "kv", path / "events", path / "documents") if p.is_dir()]
    if stores:
        if args.command == "check":  # a whole data directory (e.g. right after a restore)
            return _check_data_dir(args, parser, path)
        # Opening the data directory itself would create an empty store inside it.
        parser.error(f"{path} is a server data directory; pass one of its stores: "
                     + ", ".join(str(path / name) for name in stores))
    try:
        key = encryption_key(ServeConfig(encryption_key_file=args.encryption_key_file))
    except ConfigError as exc:
        parser.error(str(exc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            store = _open_store(path, key)
        except ImportError as exc:
            print(f"tuffdb: this kind of store is not supported here ({exc})", file=sys.stderr)
            return 1
        except LockTimeout as exc:
            print(f"tuffdb: {path} is in use ({exc}); stop the server that has it open first",
                  file=sys.stderr)
            return 1
        except Error as exc:
            print(f"tuffdb: cannot open {path}: {exc}", file=sys.stderr)
            return 1
    for w in caught:
        # Recovery notes (e.g. a torn tail truncated after a crash) are news, not failures.
        print(f"note: {w.category.__name__}: {w.message}", file=sys.stderr)
    with store:
        return _COMMANDS[args.command](store, path)


def _check_data_dir(args: argparse.Namespace, parser: argparse.ArgumentParser,
                    path: Path) -> int:
    """``tuffdb check DATA_DIR``: every store in it (documents with its own key)."""
    from tuffdb.backup import datadir  # noqa: PLC0415

    try:
        configured = encryption_key(ServeConfig(encryption_key_file=args.encryption_key_file))
        keys = datadir.Keys.of_data_dir(path, configured)
    except (ConfigError, Error) as exc:
        parser.error(str(exc))
    bad = 0
    for name in datadir.stores_in(path):
        kind = datadir.STORES[name]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                store = datadir.open_store(kind, path / name, keys.for_store(name))
        except Error as exc:
            print(f"tuffdb: cannot open {path / name}: {exc}", file=sys.stderr)
            bad += 1
            continue
        try:
            problems = store.check(deep=True) if kind == "events" else store.check()
        finally:
            store.close()
        for problem in problems:
            print(f"problem: {name}: {problem}")
        print(f"{path / name}: {len(problems)} problem(s) found" if problems
              else f"{path / name}: ok")
        bad += bool(problems)
    return 1 if bad else 0


def _check(store: Any, path: Path) -> int:
    problems = store.check()
    for problem in problems:
        print(f"problem: {problem}")
    print(f"{path}: {len(problems)} problem(s) found" if problems else f"{path}: ok")
    return 1 if problems else 0


def _stat(store: Any, _path: Path) -> int:
    print(json.dumps(store.stats(), indent=2, sort_keys=True, default=str))
    return 0


def _compact(store: Any, path: Path) -> int:
    before = _dir_bytes(path)
    store.compact()
    store.sync()
    after = _dir_bytes(path)
    print(json.dumps({"path": str(path), "bytes_before": before, "bytes_after": after}))
    return 0


_COMMANDS: dict[str, Callable[[Any, Path], int]] = {
    "check": _check, "stat": _stat, "compact": _compact,
}


def _serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from tuffdb.server import config as config_mod  # noqa: PLC0415

    flags = {k: v for k, v in vars(args).items() if k not in ("command", "print_config")}
    try:
        config = config_mod.load(flags, os.environ)
    except ConfigError as exc:
        parser.error(str(exc))
    if args.print_config:
        print(json.dumps(config_mod.redacted(config), indent=2))
        return 0
    from tuffdb.server.app import run  # noqa: PLC0415 (imports asyncio machinery)

    return run(config)


def _cluster_status(args: argparse.Namespace) -> int:
    from tuffdb.cluster import status  # noqa: PLC0415 (httpx only when asked)
    from tuffdb.cluster.etcd import EtcdClient  # noqa: PLC0415

    try:
        with EtcdClient(args.etcd) as etcd:
            doc = status.read(etcd, args.cluster)
    except Error as exc:
        print(f"tuffdb: cannot read cluster {args.cluster} from etcd {args.etcd}: {exc}",
              file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if args.json else status.render(doc))
    return 0 if doc["leader"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tuffdb`` command line; returns the exit code."""
    parser, commands = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "version":
            print(f"tuffdb {__version__}")
            return 0
        if args.command == "native":
            return _native.main(args.action, verbose=args.verbose)
        if args.command == "cluster":
            return _cluster_status(args)
        # Usage errors print the subcommand's usage, not the top-level one.
        if args.command == "serve":
            return _serve(args, commands["serve"])
        if args.command in ("backup", "restore", "archive"):
            run = {"backup": _backup, "restore": _restore, "archive": _archive}[args.command]
            return run(args, commands[args.command])
        return _store_command(args, commands[args.command])
    except KeyboardInterrupt:  # Ctrl-C before the server installed its handlers
        return 130


if __name__ == "__main__":
    sys.exit(main())
