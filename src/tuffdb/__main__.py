"""The ``tuffdb`` command (also ``python -m tuffdb``).

    tuffdb serve [options]     run the server (see ``tuffdb serve --help``)
    tuffdb check PATH          verify a store; exit 1 if problems were found
    tuffdb stat PATH           print a store's statistics as JSON
    tuffdb compact PATH        compact a store now
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
from tuffdb.errors import Error, LockTimeout
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
        return _store_command(args, commands[args.command])
    except KeyboardInterrupt:  # Ctrl-C before the server installed its handlers
        return 130


if __name__ == "__main__":
    sys.exit(main())
