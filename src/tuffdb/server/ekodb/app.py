"""The ekoDB REST application: routing, auth, permissions, rate limits, errors, settings.

One table maps the error tree to HTTP (``ERROR_STATUS``); error bodies are always JSON
``{"code", "message"}`` (ekodb-client reads them as JSON even on MessagePack paths);
success bodies are MessagePack when the request's ``Accept`` names msgpack, else JSON.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from tuffdb import metrics
from tuffdb.documents.query import referenced_fields
from tuffdb.documents.shape import parse_sort, project
from tuffdb.documents.wire import record_to_wire
from tuffdb.errors import (
    AuthError,
    ClosedError,
    ConflictError,
    Error,
    IntegrityError,
    LimitExceeded,
    NotEnoughReplicasError,
    NotFoundError,
    NotLeaderError,
    OperationalError,
    PermissionDeniedError,
    PoisonedError,
    ProgrammingError,
    ProtocolError,
    ReadOnlyError,
)
from tuffdb.security.auth import jwt_decode
from tuffdb.server.ekodb import wire as ew
from tuffdb.server.ekodb.forward import FORWARDED_HEADER, LSN_HEADER, Forwarder
from tuffdb.server.ekodb.proto import (
    Deferred,
    Request,
    Response,
    error_response,
    takeover_of,
)
from tuffdb.server.ekodb.read_cache import ReadCache
from tuffdb.server.face import cluster_node
from tuffdb.server.loop_rounds import LoopRounds

if TYPE_CHECKING:
    from tuffdb.documents.database import Database
    from tuffdb.documents.transactions import Transaction
    from tuffdb.security.auth import ApiKey, KeyRing, Permission

MAX_CACHED_TOKENS = 4096  # verified JWTs remembered (the cache is simply cleared when full)
SERVER_VERSION = "0.80.0"  # the ekoDB server version we answer to (>= 0.79.2: permission edits)

ERROR_STATUS: list[tuple[type[Error], int]] = [
    (NotEnoughReplicasError, 503), (NotLeaderError, 503),  # a cluster: retry shortly
    (PermissionDeniedError, 403), (AuthError, 401), (NotFoundError, 404), (ConflictError, 409),
    (LimitExceeded, 413), (ProtocolError, 400), (IntegrityError, 400), (ReadOnlyError, 403),
    (ClosedError, 503), (PoisonedError, 503), (ProgrammingError, 400), (OperationalError, 409),
    (Error, 500),
]


def _not_durable(exc: BaseException, what: str = "write") -> Response:
    """The reply when the round a ``what`` waited for failed (nothing it showed is durable).

    A write the cluster did not confirm (too few followers in time, or leadership lost
    during the wait) was applied and fsynced here: it may or may not survive. That is
    504, as for a forwarded write sent and left unanswered (forward.py), never 503: the
    ekoDB client retries 503 by itself, and a retried insert would be stored twice."""
    if what == "write" and isinstance(exc, (NotEnoughReplicasError, NotLeaderError)):
        return error_response(504, f"write not confirmed by the cluster ({exc}): it may or "
                                   "may not have taken effect; read before retrying")
    return error_response(status_of(exc) if isinstance(exc, Error) else 500,
                          f"{what} not made durable: {exc}")


def _with_lsn(headers: list[tuple[str, str]], lsn_of: Callable[[], int] | None
              ) -> list[tuple[str, str]]:
    return headers if lsn_of is None else [*headers, (LSN_HEADER, str(lsn_of()))]


def message_of(exc: Error) -> str:
    """An error's message for the client: a KeyError-based one (NotFoundError) without
    the quotes KeyError's str adds; every other one as it is (stripping quotes from all
    of them cut the closing quote off "... collection 'vault'")."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc)


def status_of(exc: Error) -> int:
    if isinstance(exc, IntegrityError) and exc.condition == "id":
        return 409  # the id is taken
    return next(s for t, s in ERROR_STATUS if isinstance(exc, t))


@dataclass
class Settings:
    """``/api/config``: applied immediately (``storage_mode`` at the next start)."""

    use_typed_values: bool = True
    durable_operations: bool = False
    storage_mode: str = "fast"
    default_ttl: int = 0
    token_expiry_hours: int = 1
    encrypt_ids: bool = True
    access_mode: str = "read_write"
    rate_limit_per_minute: int = 0  # 0 = unlimited

    def update(self, changes: Any) -> None:
        if not isinstance(changes, dict):
            raise ProtocolError("config body must be an object of settings")
        known = {f.name: f for f in fields(self)}
        new = asdict(self)
        for name, value in changes.items():
            if name not in known:
                raise ProtocolError(f"unknown setting {name!r}; known: {', '.join(known)}")
            want = bool if isinstance(new[name], bool) else type(new[name])
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise ProtocolError(f"setting {name} must be {want.__name__}")
            new[name] = value
        checks = {"storage_mode": new["storage_mode"] in ("fast", "balanced"),
                  "access_mode": new["access_mode"] in ("read_write", "read", "write"),
                  "default_ttl": 0 <= new["default_ttl"] <= 604800,
                  "token_expiry_hours": 1 <= new["token_expiry_hours"] <= 168,
                  "rate_limit_per_minute": new["rate_limit_per_minute"] >= 0}
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ProtocolError(f"invalid value for {', '.join(bad)}")
        for k, v in new.items():
            setattr(self, k, v)


class Ctx:
    """One request's context for a handler (a plain class: see proto.Request)."""

    __slots__ = ("key", "mp_reply", "params", "req")

    def __init__(self, req: Request, params: dict[str, str], key: ApiKey | None,
                 mp_reply: bool) -> None:  # noqa: FBT001
        self.req = req
        self.params = params
        self.key = key
        self.mp_reply = mp_reply

    def body(self, empty: Any = None) -> Any:
        return ew.decode_body(self.req.body, self.req.headers.get("content-type", ""), empty=empty)


# Requests a cluster follower passes on to the leader (everything that writes).
FORWARDED = frozenset({"write", "admin", "kv_write"})

Handler = Callable[..., Any]
# (registration order, literal segments (index, text), parameter indexes, handler, access)
Route = tuple[int, tuple[tuple[int, str], ...], tuple[int, ...], Handler, str]


class App:
    def __init__(self, db: Database, keyring: KeyRing, settings: Settings,
                 save_settings: Callable[[], None]) -> None:
        self.db, self.keyring, self.settings = db, keyring, settings
        self.save_settings = save_settings
        self.transactions: dict[str, Transaction] = {}
        self._tokens: dict[str, tuple[str, float]] = {}  # Authorization value -> (key id, expiry)
        self.reads = ReadCache()  # encoded by-id replies (read_cache.py)
        self.routes: list[tuple[str, tuple[str, ...], Handler, str]] = []
        # Candidates by (method, segment count, second segment); None: a parameter there.
        self._by_shape: dict[tuple[str, int, str | None], list[Route]] = {}
        self._windows: dict[str, tuple[int, int]] = {}
        # The cluster node (tuffdb serve --cluster): a follower forwards writes to the
        # leader; a leader's rounds wait for followers off the loop (threaded rounds).
        self.node = cluster_node()
        self.forwarder = Forwarder() if self.node is not None else None
        self._rounds = LoopRounds(db.kv, aio=self.node is None,  # a round per pass
                                  threaded=self.node is not None)
        from tuffdb.server.ekodb import (  # noqa: PLC0415 - they import App
            admin,
            data,
            search,
            sse,
            ws,
        )

        data.register(self)
        admin.register(self)
        search.register(self)
        sse.register(self)
        ws.register(self)
        # reads of one record, held only while that record's write waits (_when_seen)
        self._one_record: tuple[Handler, ...] = (data.find_by_id_reply,)
        db.on_written = self._written

    def route(self, method: str, path: str, handler: Handler, access: str) -> None:
        """``access``: open | read | write | admin | auth (any valid token)."""
        segs = tuple(path.strip("/").split("/"))
        self.routes.append((method, segs, handler, access))
        literals = tuple((i, p) for i, p in enumerate(segs) if not p.startswith("{"))
        params = tuple(i for i, p in enumerate(segs) if p.startswith("{"))
        second = segs[1] if len(segs) > 1 and not segs[1].startswith("{") else None
        entry = (len(self.routes), literals, params, handler, access)
        self._by_shape.setdefault((method, len(segs), second), []).append(entry)

    def _match(self, method: str, segs: list[str]) -> tuple[Handler, str, list[str]] | None:
        """The first registered route matching ``segs`` (a dict lookup on the method,
        the segment count and the second segment, then the few candidates there)."""
        n = len(segs)
        found = self._by_shape.get((method, n, segs[1] if n > 1 else None), [])
        wild = self._by_shape.get((method, n, None))
        if wild and n > 1:  # a parameter in second place: first match in registration order
            found = sorted([*found, *wild], key=lambda e: e[0])
        for _, literals, params, handler, access in found:
            for i, lit in literals:
                if segs[i] != lit:
                    break
            else:
                return handler, access, [segs[i] for i in params]
        return None

    def handle(self, req: Request) -> Response | Deferred | asyncio.Future[Response]:
        """The reply to ``req``: a Response, or (a write under ``durable_operations``) a
        Deferred or a future of it, ready once the write is durable. Called on the loop
        thread; no task or coroutine per request (HttpProtocol writes a Response at once).
        Under ``durable_operations`` a reply that may show a write not yet durable (a read's,
        or any failure's: a 404 may show a delete) waits for it too (:meth:`_when_seen`)."""
        segs, params = ew.split_url(req.url)
        mp = "msgpack" in req.headers.get("accept", "")
        headers: list[tuple[str, str]] = []
        access, record = "open", None
        try:
            found = self._match(req.method, segs)
            if found is None:
                raise NotFoundError(f"no endpoint {req.method} /{'/'.join(segs)}")
            handler, access, args = found
            node = self.node
            if node is not None and not node.is_leader() and (
                    access in FORWARDED or (len(segs) > 1 and segs[1] == "transactions")
                    or "transaction_id" in params):
                assert self.forwarder is not None
                return asyncio.ensure_future(self.forwarder.forward(
                    req, node.leader_address("http"), node.read_own_write))
            # A write a follower forwarded: the answer says which rounds cover it.
            lsn_of = node.last_lsn if node is not None and req.headers.get(
                FORWARDED_HEADER) else None
            key = None if access == "open" else self._authenticate(req)
            if self.settings.rate_limit_per_minute:
                headers = self._rate_limit(key.key_id if key else req.peer)
            self._check_access(key, access)
            ctx = Ctx(req, params, key, mp)
            if handler in self._one_record:
                record = args
            since = self.opening()
            result = handler(self, ctx, *args)
            writes = access in ("write", "admin", "kv_write")
            if writes and (self.settings.durable_operations or lsn_of is not None):
                # (A write a follower forwarded waits for its round in any mode: the
                # follower answers once it applied it, so its client reads it there.)
                return self._when_durable(
                    lambda: self._reply(result, _with_lsn(headers, lsn_of), mp), since)
            if (self.settings.durable_operations and access in ("read", "kv_read")
                    and self._rounds.holds_readers):
                return self._when_seen(self._reply(result, headers, mp), record)
        except _RateLimited as exc:
            return Response(429, ew.encode({"code": 429, "message": str(exc)}, False),
                             headers=[("Retry-After", str(exc.retry_after)), *exc.headers])
        except Error as err:
            resp = error_response(status_of(err), message_of(err))
            resp.headers.extend(headers)
            return self._failed(resp, access, record)
        except RecursionError:
            resp = error_response(400, "bad request: nested too deeply")
            resp.headers.extend(headers)
            return resp
        except (TypeError, ValueError, KeyError, re.error) as bad:
            resp = error_response(400, f"bad request: {bad}")
            resp.headers.extend(headers)
            return resp
        return self._reply(result, _with_lsn(headers, lsn_of), mp)

    def _failed(self, resp: Response, access: str, record: list[str] | None) -> Response | Deferred:
        """An error reply to a data request: under durable_operations it may show a write
        not yet durable (a 404 after a delete, a 409 after an insert), so it waits too."""
        if (self.settings.durable_operations and access != "open"
                and self._rounds.holds_readers):
            return self._when_seen(resp, record)
        return resp

    @staticmethod
    def _reply(result: Any, headers: list[tuple[str, str]], mp: bool) -> Response:
        if isinstance(result, Response):
            result.headers.extend(headers)
            return result
        ctype = "application/msgpack" if mp else "application/json"
        return Response(200, ew.encode(result, mp), ctype, headers)

    def _when_durable(self, reply: Callable[[], Response],
                      since: int = 0) -> Deferred | asyncio.Future[Response]:
        """``reply()`` once every write so far is durable (an error reply if the store
        failed meanwhile: nothing acknowledged that is not on disk). With a log, a
        Deferred the loop's round completes (proto.py); without one, a future of
        the background spill."""

        def make(error: BaseException | None) -> Response:
            return reply() if error is None else _not_durable(error)

        if self.db.kv.durability != "none":
            deferred = Deferred(make)
            self._rounds.after_round(deferred.ready, since)
            return deferred
        out: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

        def done(f: asyncio.Future[None]) -> None:
            if out.done():
                return
            if f.cancelled():
                out.set_result(error_response(500, "write not made durable: cancelled"))
            else:
                out.set_result(make(f.exception()))

        self.durable().add_done_callback(done)  # type: ignore[attr-defined]
        return out

    def _when_seen(self, resp: Response, record: list[str] | None) -> Response | Deferred:
        """``resp`` to a read, held until the writes it may show are durable: those of
        every round not yet durable, or for a read of one ``record`` ([collection, id])
        the round its last write joined (and a drop of its collection's). PostgreSQL
        makes a commit visible only after its WAL flush; without this a reader could act
        on a write that a crash then loses."""
        if takeover_of(resp) is not None:
            return resp  # a stream (SSE) pushes only durable mutations itself
        rounds = self._rounds
        waiters = (rounds.writes_round() if record is None else
                   rounds.keys_round(((record[0], record[1]), (record[0], None))))
        if waiters is None:
            return resp  # nothing it may show waits (the usual case: no Deferred built)
        deferred = Deferred(lambda error: resp if error is None else
                            _not_durable(error, "read of a write"))
        waiters.append(deferred.ready)
        metrics.EKODB_READS_HELD.inc()
        return deferred

    def _written(self, keys: list[tuple[str, str | None]]) -> None:
        """``Database.on_written``: under durable_operations, name the records a loop pass
        wrote to its round (loop_rounds.py), so that their readers wait for it. A write
        made off the loop thread is not the loop's round's (it waits for its own)."""
        if not self.settings.durable_operations or self.db.kv.durability == "none":
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._rounds.mark(keys)

    def opening(self) -> int:
        """Before a request's writes: the ``since`` its round needs on a cluster node
        (``LoopRounds.opening``; 0 on a single node)."""
        return self._rounds.opening()

    def visible(self) -> Awaitable[None] | None:
        """For a WebSocket read: done once every write it may show is durable (None: at
        once), as :meth:`_when_seen` without a record."""
        if not self.settings.durable_operations or not self._rounds.holds_readers:
            return None
        return self._rounds.seen_future()

    def idle_for_spin(self) -> bool:
        """Whether the loop may busy-poll now (busy_poll.py): not while a round's fsync
        runs on this core."""
        return not self._rounds.syncing

    def close(self) -> None:
        """Settle the durable round in flight (before the database closes)."""
        self._rounds.close()
        if self.forwarder is not None:
            self.forwarder.close()

    def durable(self, since: int = 0) -> Awaitable[None]:
        """Done once every write made so far is durable (``since``: :meth:`opening`'s).

        With a write-ahead log, the writes of one loop pass share one round, written by
        the loop thread once the pass is done (loop_rounds.py, as the RESP face does) and
        fsynced through Linux AIO: the loop goes on serving while the fsync runs and the
        next round gathers meanwhile. Inline (the loop waiting in fdatasync) the rare
        writes of YCSB B/8 stopped every reader for each fsync; A/B on the compiled build,
        durable tier, wrk, 2 reps, AIO vs inline: B/8 25.0k/24.0k vs 16.3k/17.6k ops/s,
        A/8 12.0k/10.3k vs 8.7k/8.2k, F/8 9.1k/9.2k vs 8.0k/6.9k, A/1 3.2k/3.1k vs
        2.9k/2.6k. A committer thread instead (measured in the session before) pays a
        wake-up and a GIL hand-off that queue behind the busy loop on the one core.
        Without a log (durability "none") a write is durable once spilled, which the
        background thread does; that is awaited without blocking the loop.
        """
        kv = self.db.kv
        if kv.durability != "none":
            return self._rounds.future(since)
        return asyncio.wrap_future(kv.when_durable(kv.write_ticket()))

    def _authenticate(self, req: Request) -> ApiKey:
        auth = req.headers.get("authorization", "")
        # A token's signature is checked once; later requests only check its expiry and
        # that its key still exists (revocation), as KeyRing.verify does. Looked up by the
        # header's whole value, so a hit neither lowercases nor slices the token.
        hit = self._tokens.get(auth)
        if hit is not None and hit[1] > time.time():
            key = self.keyring._by_id.get(hit[0])  # noqa: SLF001 - verify's own lookup
            if key is not None:
                return key
        if auth[:7].lower() != "bearer ":
            raise AuthError("missing 'Authorization: Bearer <token>'; get one from /api/auth/token")
        token = auth[7:].strip()
        key = self.keyring.verify(token)  # raises AuthError: forged, expired, revoked
        if len(self._tokens) >= MAX_CACHED_TOKENS:
            self._tokens.clear()
        self._tokens[auth] = (key.key_id, float(jwt_decode(token, self.keyring.secret)["exp"]))
        return key

    def reauthenticate(self, req: Request) -> ApiKey:
        """The key of a live session's opening request ``req`` (a WebSocket session, an
        SSE stream) as it is now, checked as a new request would be: AuthError once the
        key is revoked or the token expired; its permissions as they are now."""
        return self._authenticate(req)

    def _check_access(self, key: ApiKey | None, access: str) -> None:
        mode = self.settings.access_mode
        if access == "admin" and (key is None or not key.is_admin):
            raise PermissionDeniedError("this endpoint needs an admin API key")
        if access.startswith("kv_") and key is not None:
            key.require("_kv", access[3:])
            access = access[3:]
        if access == "write" and mode == "read":
            raise PermissionDeniedError("the server is in access_mode=read")
        if access == "read" and mode == "write":
            raise PermissionDeniedError("the server is in access_mode=write")

    def _rate_limit(self, who: str) -> list[tuple[str, str]]:
        limit = self.settings.rate_limit_per_minute
        if not limit:
            return []
        now = int(time.time())  # a window opens at a principal's first request, lasts 60 s
        start, count = self._windows.get(who, (now, 0))
        if now >= start + 60:
            start, count = now, 0
        reset = start + 60
        if count >= limit:
            hdrs = [("X-RateLimit-Limit", str(limit)), ("X-RateLimit-Remaining", "0"),
                    ("X-RateLimit-Reset", str(reset))]
            raise _RateLimited(max(reset - now, 1), hdrs)
        self._windows[who] = (start, count + 1)
        return [("X-RateLimit-Limit", str(limit)),
                ("X-RateLimit-Remaining", str(limit - count - 1)),
                ("X-RateLimit-Reset", str(reset))]

    # --- helpers for handlers -----------------------------------------------------------
    def perm(self, ctx: Ctx, collection: str, action: str) -> Permission | None:
        assert ctx.key is not None
        return ctx.key.require(collection, action)

    def tx(self, ctx: Ctx) -> Transaction | None:
        tid = ctx.params.get("transaction_id")
        if tid is None:
            return None
        return self.transaction(ctx, tid)

    def transaction(self, ctx: Ctx, tid: str) -> Transaction:
        """Transaction ``tid`` when the request's key began it; to any other key it does
        not exist (404): a transaction is its key's own, and another key that learnt its
        id could otherwise read its staged writes, add writes the owner's commit would
        make its own, or commit or roll it back at a moment of its choosing."""
        tx = self.transactions.get(tid)
        if tx is None or ctx.key is None or tx.owner != ctx.key.key_id:
            raise NotFoundError(f"no transaction '{tid}'")
        return tx

    def out(self, record: dict[str, Any], perm: Permission | None) -> dict[str, Any]:
        """A record as sent: field restrictions applied, typed values per the setting."""
        if perm is not None and perm.hides_fields:
            record = project(record, perm.select_fields, perm.exclude_fields)
        return record_to_wire(record, typed=self.settings.use_typed_values)

    def check_readable(self, perm: Permission | None, c: str, fields: Iterable[str] = (), *,
                       filter: Any = None, sort: Any = None) -> None:  # noqa: A002
        """A key that may read only some fields of ``c`` may also filter, sort, group,
        join and search by those fields only: an answer that depends on a field tells
        what it holds (a filter on it, probed value by value, reads it out). ``filter``
        and ``sort`` (request specs) are read only for such a key.

        :raises PermissionDeniedError: naming the fields it may not read.
        """
        if perm is None or not perm.hides_fields:
            return
        used = {*fields, *referenced_fields(filter), *(f for f, _ in parse_sort(sort))}
        hidden = sorted(f for f in used if not perm.may_read(f))
        if hidden:
            raise PermissionDeniedError(
                f"this API key may not read fields {hidden} of collection '{c}', so it may "
                "not filter, sort, join or search by them either")

    def check_writable(self, perm: Permission | None, record: dict[str, Any]) -> None:
        if perm is None or perm.writable_fields is None:
            return
        allowed = {*perm.writable_fields, "id", "ttl", "ttl_update_on_access"}
        extra = sorted(set(record) - allowed)
        if extra:
            raise PermissionDeniedError(f"this API key may not write fields {extra}")


class _RateLimited(Exception):  # noqa: N818 - internal signal, never escapes
    def __init__(self, retry_after: int, headers: list[tuple[str, str]]) -> None:
        super().__init__(f"rate limit exceeded; retry in {retry_after} s")
        self.retry_after, self.headers = retry_after, headers
