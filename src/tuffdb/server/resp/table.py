"""The command table: name -> handler, arity, flags and key positions.

Handlers register with :func:`command`; the connection looks the lowercase name up,
checks arity and flags, and calls ``handler(conn, args)`` which returns the encoded
reply. ``args[0]`` is the command name as sent. The same metadata answers ``COMMAND``,
``COMMAND COUNT``, ``COMMAND INFO`` and ``COMMAND DOCS``.

Flags (a subset of Redis's): ``write`` (the batch needs a group commit under
``appendfsync always``), ``readonly``, ``fast``, ``noauth`` (allowed before AUTH),
``pubsub`` (allowed in RESP2 subscribed mode), ``nomulti`` (runs at once inside MULTI
instead of being queued), ``noscript``, ``loading``, ``stale``, ``admin``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tuffdb.server.resp.reply import EMPTY_ARRAY, Resp2, array, bulk, integer, simple

if TYPE_CHECKING:
    from tuffdb.server.resp.conn import Conn

Handler = Callable[["Conn", list[bytes]], bytes]
# A pipeline of one command, run at once: one reply per command, each exactly what the
# single handler would have returned, or [] when it does not apply (then: one by one).
BatchHandler = Callable[["Conn", list[list[bytes]]], list[bytes]]


class CommandError(Exception):
    """A command failed; ``str(exc)`` is the full Redis error line without the ``-``."""


WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INTEGER = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
SYNTAX = "ERR syntax error"


@dataclass(slots=True)
class Spec:
    name: str
    handler: Handler
    arity: int  # Redis convention: N exact, -N at least N (name included)
    flags: frozenset[str]
    first_key: int
    last_key: int
    step: int
    group: str
    summary: str
    since: str
    subcommands: dict[str, Spec] = field(default_factory=dict)
    write: bool = False


TABLE: dict[bytes, Spec] = {}
BATCHED: dict[bytes, BatchHandler] = {}  # lowercase name -> batch form of its handler


def command(  # noqa: PLR0913  (the metadata COMMAND reports, one keyword each)
    name: str,
    arity: int,
    flags: str = "",
    keys: tuple[int, int, int] = (0, 0, 0),
    *,
    group: str = "generic",
    summary: str = "",
    since: str = "1.0.0",
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        flagset = frozenset(flags.split())
        spec = Spec(
            name, fn, arity, flagset, *keys, group, summary or fn.__doc__ or "", since,
            write="write" in flagset,
        )
        TABLE[name.encode()] = spec
        return fn

    return register


def batched(name: str) -> Callable[[BatchHandler], BatchHandler]:
    """Register the batch form of an already registered command (see ``BatchHandler``)."""

    def register(fn: BatchHandler) -> BatchHandler:
        BATCHED[name.encode()] = fn
        return fn

    return register


def arity_ok(spec: Spec, argc: int) -> bool:
    a = spec.arity
    return argc == a if a > 0 else argc >= -a


def command_info(spec: Spec, enc: type[Resp2]) -> bytes:
    """One ``COMMAND`` / ``COMMAND INFO`` entry (Redis 7 shape, without key specs)."""
    return array([
        bulk(spec.name.encode()),
        integer(spec.arity),
        enc.set([simple(f) for f in sorted(spec.flags) if f not in {"nomulti", "pubsub"}]),
        integer(spec.first_key),
        integer(spec.last_key),
        integer(spec.step),
        enc.set([simple("@" + spec.group)]),
        EMPTY_ARRAY,
        EMPTY_ARRAY,
        EMPTY_ARRAY,
    ])


def command_docs(spec: Spec, enc: type[Resp2]) -> bytes:
    return enc.map([
        (bulk(b"summary"), bulk(spec.summary.encode())),
        (bulk(b"since"), bulk(spec.since.encode())),
        (bulk(b"group"), bulk(spec.group.encode())),
    ])
