"""A thin synchronous etcd v3 client over the JSON gRPC gateway (etcd 3.4), as Patroni does.

We need a coordination client that imports everywhere tuffdb does, because the Python
gRPC clients of etcd are unmaintained or fail with protobuf >= 4 (see
``docs/design/replication.md``). The gateway is plain HTTP/1.1 + JSON: every unary call is
one ``POST /v3/...``; a watch is one ``POST /v3/watch`` answered by a chunked stream of
newline-separated ``{"result": ...}`` objects. The gateway's two encodings are undone in
one place (:func:`_b64`, :func:`_unb64`, :func:`_int`): keys and values travel as base64,
int64 fields (revisions, lease ids, TTLs) as JSON strings, and fields at their zero value
are omitted.

Endpoints and failover. ``EtcdClient("http://a:2379,http://b:2379")`` keeps to the
endpoint that last answered. A call moves on to the next endpoint only when it is sure the
request did not take effect: the connection was refused or could not be made, the member
said it has no leader, or the call was a read. A write whose answer is lost (a timeout
after sending, a dropped connection) raises :class:`~tuffdb.errors.CoordinationUnavailable`
with ``maybe_applied=True`` instead of being retried: a retried transaction could win
twice or report a loss it actually won. Every call has a timeout (``timeout`` seconds,
the whole request).

Errors: a refusal by etcd is :class:`~tuffdb.errors.CoordinationError` (``.code`` the gRPC
status, ``.compact_revision`` for history compacted away), a vanished lease
:class:`~tuffdb.errors.LeaseExpired`, no answer :class:`~tuffdb.errors.CoordinationUnavailable`.

Thread safety: one client may be shared by threads (httpx's pool is thread-safe); a
:class:`Watch` is iterated by one thread and may be cancelled from any.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from tuffdb.errors import (
    CoordinationError,
    CoordinationUnavailable,
    LeaseExpired,
    ProgrammingError,
)

__all__ = [
    "Compare",
    "DeleteResult",
    "EtcdClient",
    "Event",
    "KeyValue",
    "LeaseStatus",
    "Op",
    "PutResult",
    "RangeResult",
    "TxnResult",
    "Watch",
    "WatchResponse",
]

DEFAULT_TIMEOUT_S = 2.0
GRPC_NOT_FOUND = 5
GRPC_OUT_OF_RANGE = 11
GRPC_UNAVAILABLE = 14
NO_LEADER = "etcdserver: no leader"  # refused before any proposal: safe to retry elsewhere
COMPACTED = "required revision has been compacted"

Key = bytes | str


# -- the gateway's encodings, in one place --------------------------------------------------

def _bytes(value: Key) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _b64(value: Key) -> str:
    return base64.b64encode(_bytes(value)).decode("ascii")


def _unb64(value: str | None) -> bytes:
    return base64.b64decode(value) if value else b""


def _int(value: str | int | None) -> int:
    """An int64 field: a JSON string (or number), absent when zero."""
    return int(value) if value else 0


def prefix_end(prefix: Key) -> bytes:
    """The ``range_end`` that makes ``[prefix, end)`` every key starting with ``prefix``."""
    raw = bytearray(_bytes(prefix))
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return b"\0"  # the empty prefix (or all 0xff): every key from ``prefix`` on
    raw[-1] += 1
    return bytes(raw)


def _range_fields(key: Key, prefix: bool) -> dict[str, str]:
    fields = {"key": _b64(key)}
    if prefix:
        fields["range_end"] = _b64(prefix_end(key))
    return fields


# -- results ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as etcd stores it. ``create_revision`` is 0 for a key that does not exist."""

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> KeyValue:
        return cls(_unb64(raw.get("key")), _unb64(raw.get("value")),
                   _int(raw.get("create_revision")), _int(raw.get("mod_revision")),
                   _int(raw.get("version")), _int(raw.get("lease")))


def _kvs(raw: list[dict[str, Any]] | None) -> tuple[KeyValue, ...]:
    return tuple(KeyValue.decode(kv) for kv in raw or ())


def _revision(raw: dict[str, Any]) -> int:
    return _int(raw.get("header", {}).get("revision"))


@dataclass(frozen=True, slots=True)
class RangeResult:
    """``kvs`` found, ``count`` matching in all (``more`` when ``limit`` cut them), and the
    store's ``revision`` when the read was served."""

    kvs: tuple[KeyValue, ...]
    count: int
    more: bool
    revision: int

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> RangeResult:
        return cls(_kvs(raw.get("kvs")), _int(raw.get("count")), bool(raw.get("more")),
                   _revision(raw))

    @property
    def first(self) -> KeyValue | None:
        """The first key found, or None."""
        return self.kvs[0] if self.kvs else None


@dataclass(frozen=True, slots=True)
class PutResult:
    """``revision`` the put created; ``prev_kv`` when asked for and the key existed."""

    revision: int
    prev_kv: KeyValue | None

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> PutResult:
        prev = raw.get("prev_kv")
        return cls(_revision(raw), KeyValue.decode(prev) if prev else None)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """``deleted`` keys; ``prev_kvs`` when asked for."""

    revision: int
    deleted: int
    prev_kvs: tuple[KeyValue, ...]

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> DeleteResult:
        return cls(_revision(raw), _int(raw.get("deleted")), _kvs(raw.get("prev_kvs")))


@dataclass(frozen=True, slots=True)
class TxnResult:
    """Whether every compare held, and one result per op of the branch that ran."""

    succeeded: bool
    responses: tuple[RangeResult | PutResult | DeleteResult, ...]
    revision: int


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    """``ttl`` seconds left (-1: expired or unknown), the ``granted_ttl`` and attached keys."""

    id: int
    ttl: int
    granted_ttl: int
    keys: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Event:
    """A watched change: ``type`` PUT or DELETE; ``kv.mod_revision`` is its revision."""

    type: Literal["PUT", "DELETE"]
    kv: KeyValue
    prev_kv: KeyValue | None


@dataclass(frozen=True, slots=True)
class WatchResponse:
    """One message of a watch: its events (empty for a progress notification) and the
    store's revision when it was sent (resume from ``revision + 1``)."""

    revision: int
    events: tuple[Event, ...]


# -- transactions ----------------------------------------------------------------------------

_TARGETS = {"create": ("CREATE", "create_revision"), "mod": ("MOD", "mod_revision"),
            "version": ("VERSION", "version"), "value": ("VALUE", "value"),
            "lease": ("LEASE", "lease")}
_RESULTS = {"==": "EQUAL", "!=": "NOT_EQUAL", ">": "GREATER", "<": "LESS"}


@dataclass(frozen=True, slots=True)
class Compare:
    """One condition of a transaction: ``target(key) op operand``.

    ``Compare.create(k, "==", 0)`` (the key is absent), ``Compare.mod(k, "==", rev)``,
    ``Compare.value(k, "==", b"x")``, ``Compare.version(k, ">", 0)``,
    ``Compare.lease(k, "==", lease_id)``.
    """

    target: Literal["create", "mod", "version", "value", "lease"]
    key: Key
    op: Literal["==", "!=", ">", "<"]
    operand: int | bytes

    @classmethod
    def create(cls, key: Key, op: Literal["==", "!=", ">", "<"], revision: int) -> Compare:
        return cls("create", key, op, revision)

    @classmethod
    def mod(cls, key: Key, op: Literal["==", "!=", ">", "<"], revision: int) -> Compare:
        return cls("mod", key, op, revision)

    @classmethod
    def version(cls, key: Key, op: Literal["==", "!=", ">", "<"], version: int) -> Compare:
        return cls("version", key, op, version)

    @classmethod
    def value(cls, key: Key, op: Literal["==", "!=", ">", "<"], value: Key) -> Compare:
        return cls("value", key, op, _bytes(value))

    @classmethod
    def lease(cls, key: Key, op: Literal["==", "!=", ">", "<"], lease_id: int) -> Compare:
        return cls("lease", key, op, lease_id)

    def encode(self) -> dict[str, Any]:
        target, field = _TARGETS[self.target]
        operand = (_b64(self.operand) if isinstance(self.operand, bytes)
                   else str(self.operand))
        return {"target": target, "result": _RESULTS[self.op], "key": _b64(self.key),
                field: operand}


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a transaction branch: ``Op.get``, ``Op.put``, ``Op.delete``."""

    kind: Literal["range", "put", "delete_range"]
    fields: dict[str, Any]

    @classmethod
    def get(cls, key: Key, *, prefix: bool = False) -> Op:
        return cls("range", _range_fields(key, prefix))

    @classmethod
    def put(cls, key: Key, value: Key, *, lease: int = 0) -> Op:
        fields = {"key": _b64(key), "value": _b64(value)}
        if lease:
            fields["lease"] = str(lease)
        return cls("put", fields)

    @classmethod
    def delete(cls, key: Key, *, prefix: bool = False) -> Op:
        return cls("delete_range", _range_fields(key, prefix))

    def encode(self) -> dict[str, Any]:
        return {f"request_{self.kind}": self.fields}


def _decode_op_response(raw: dict[str, Any]) -> RangeResult | PutResult | DeleteResult:
    if "response_range" in raw:
        return RangeResult.decode(raw["response_range"])
    if "response_put" in raw:
        return PutResult.decode(raw["response_put"])
    if "response_delete_range" in raw:
        return DeleteResult.decode(raw["response_delete_range"])
    raise CoordinationError(f"unexpected transaction response from etcd: {raw!r}")


# -- the client ------------------------------------------------------------------------------

class EtcdClient:
    """A client of one etcd cluster, reached through any of ``endpoints``.

    :param endpoints: ``"http://h:p[,http://h:p...]"`` or a sequence of URLs.
    :param timeout: seconds for each request (connect, send, answer), per endpoint tried.
    :param local_address: bind outgoing connections to this address (a node's own
        ``--advertise`` address, so that network faults aimed at it hit this traffic too).
    """

    def __init__(self, endpoints: str | Sequence[str], *, timeout: float = DEFAULT_TIMEOUT_S,
                 local_address: str | None = None) -> None:
        urls = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
        self.endpoints = [u.strip().rstrip("/") for u in urls if u.strip()]
        if not self.endpoints:
            raise ProgrammingError("no etcd endpoint given: pass --etcd URL[,URL...]")
        self.timeout = timeout
        self._current = 0
        transport = httpx.HTTPTransport(local_address=local_address)
        self._http = httpx.Client(transport=transport, timeout=timeout)

    @property
    def endpoint(self) -> str:
        """The endpoint the next call tries first (the last one that answered)."""
        return self.endpoints[self._current]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EtcdClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- KV --------------------------------------------------------------------------------

    def get(self, key: Key, *, prefix: bool = False, serializable: bool = False,
            limit: int = 0, revision: int = 0, keys_only: bool = False) -> RangeResult:
        """Read ``key`` (or every key under it with ``prefix``).

        Linearizable unless ``serializable`` (then served by the member asked, possibly
        stale). ``revision`` reads the past (:class:`CoordinationError` with
        ``compact_revision`` once compacted).
        """
        body: dict[str, Any] = _range_fields(key, prefix)
        if serializable:
            body["serializable"] = True
        if limit:
            body["limit"] = str(limit)
        if revision:
            body["revision"] = str(revision)
        if keys_only:
            body["keys_only"] = True
        return RangeResult.decode(self._call("/v3/kv/range", body, write=False))

    def put(self, key: Key, value: Key, *, lease: int = 0, prev_kv: bool = False) -> PutResult:
        """Set ``key`` to ``value``, attached to ``lease`` when given (deleted with it).

        :raises LeaseExpired: ``lease`` no longer exists.
        """
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        if prev_kv:
            body["prev_kv"] = True
        return PutResult.decode(self._call("/v3/kv/put", body, write=True))

    def delete(self, key: Key, *, prefix: bool = False, prev_kv: bool = False) -> DeleteResult:
        """Delete ``key`` (or every key under it with ``prefix``)."""
        body: dict[str, Any] = _range_fields(key, prefix)
        if prev_kv:
            body["prev_kv"] = True
        return DeleteResult.decode(self._call("/v3/kv/deleterange", body, write=True))

    def txn(self, compare: Sequence[Compare], success: Sequence[Op] = (),
            failure: Sequence[Op] = ()) -> TxnResult:
        """If every ``compare`` holds, run ``success``, else ``failure``: atomically.

        E.g. take the leader key only if absent, under a lease, and learn the holder if not::

            txn([Compare.create(k, "==", 0)], [Op.put(k, me, lease=lid)], [Op.get(k)])
        """
        body = {"compare": [c.encode() for c in compare],
                "success": [o.encode() for o in success],
                "failure": [o.encode() for o in failure]}
        raw = self._call("/v3/kv/txn", body, write=True)
        responses = tuple(_decode_op_response(r) for r in raw.get("responses") or ())
        return TxnResult(bool(raw.get("succeeded")), responses, _revision(raw))

    def compact(self, revision: int) -> None:
        """Discard history before ``revision`` (reads and watches from before then fail)."""
        self._call("/v3/kv/compaction", {"revision": str(revision)}, write=True)

    # -- leases ----------------------------------------------------------------------------

    def lease_grant(self, ttl: int, lease_id: int = 0) -> int:
        """A new lease of ``ttl`` whole seconds; returns its id (etcd picks one if 0)."""
        body = {"TTL": str(ttl), "ID": str(lease_id)}
        return _int(self._call("/v3/lease/grant", body, write=True).get("ID"))

    def lease_keepalive(self, lease_id: int) -> int:
        """Renew the lease once; returns the TTL it was renewed to, in seconds.

        :raises LeaseExpired: the lease no longer exists (expired or revoked).
        """
        # Renewing twice is harmless: retried on another endpoint like a read.
        raw = self._call("/v3/lease/keepalive", {"ID": str(lease_id)}, write=False)
        ttl = _int(raw.get("result", {}).get("TTL"))
        if ttl <= 0:
            raise LeaseExpired(f"etcd lease {lease_id:x} has expired or was revoked",
                               code=GRPC_NOT_FOUND)
        return ttl

    def lease_revoke(self, lease_id: int) -> None:
        """End the lease now; the keys attached to it are deleted.

        :raises LeaseExpired: the lease was already gone.
        """
        self._call("/v3/lease/revoke", {"ID": str(lease_id)}, write=True)

    def lease_ttl(self, lease_id: int, *, keys: bool = False) -> LeaseStatus:
        """How long the lease has left (``ttl == -1`` once it has expired)."""
        body: dict[str, Any] = {"ID": str(lease_id), "keys": keys}
        raw = self._call("/v3/lease/timetolive", body, write=False)
        return LeaseStatus(lease_id, _int(raw.get("TTL")), _int(raw.get("grantedTTL")),
                           tuple(_unb64(k) for k in raw.get("keys") or ()))

    # -- watch -----------------------------------------------------------------------------

    def watch(self, key: Key, *, prefix: bool = False, start_revision: int = 0,
              prev_kv: bool = False, idle_timeout: float | None = None) -> Watch:
        """Watch ``key`` (or the keys under it) from ``start_revision`` (0: from now on).

        Returns once etcd has confirmed the watch (so no later change is missed), within
        the client's ``timeout`` (:class:`~tuffdb.errors.CoordinationUnavailable` if not).
        Iterate the returned :class:`Watch` for :class:`WatchResponse` messages. The stream
        ends only by :meth:`Watch.cancel`; anything else raises. ``idle_timeout`` makes a
        watch that hears nothing for that long raise
        :class:`~tuffdb.errors.CoordinationUnavailable` (a paused or cut-off etcd keeps the
        connection open and silent): resume with a new watch from the last revision seen.
        """
        request: dict[str, Any] = _range_fields(key, prefix)
        if start_revision:
            request["start_revision"] = str(start_revision)
        if prev_kv:
            request["prev_kv"] = True
        return Watch(self, {"create_request": request}, idle_timeout)

    # -- transport -------------------------------------------------------------------------

    def _call(self, path: str, body: dict[str, Any], *, write: bool) -> dict[str, Any]:
        """POST ``body`` to the first endpoint that takes it; the one failover policy."""
        payload = json.dumps(body).encode()
        failures: list[str] = []
        start = self._current
        for step in range(len(self.endpoints)):
            index = (start + step) % len(self.endpoints)
            url = self.endpoints[index] + path
            try:
                response = self._http.post(url, content=payload)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                failures.append(f"{url}: {exc!r}")  # never sent: safe to try elsewhere
                continue
            except httpx.TransportError as exc:
                if write:
                    raise CoordinationUnavailable(
                        f"etcd did not answer {path} at {url} within {self.timeout} s "
                        f"({exc!r}); the write may or may not have taken effect",
                        maybe_applied=True) from exc
                failures.append(f"{url}: {exc!r}")
                continue
            raw = _json(response)
            if response.status_code == 200:
                self._current = index
                return raw
            error = _error(path, url, raw)
            if isinstance(error, CoordinationUnavailable) and (
                    not write or NO_LEADER in str(error)):
                failures.append(str(error))
                continue
            raise error
        raise CoordinationUnavailable(f"no etcd endpoint answered {path}: {'; '.join(failures)}")


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        raw = response.json()
    except ValueError as exc:
        raise CoordinationError(f"etcd answered {response.status_code} with non-JSON: "
                                f"{response.text[:200]!r}") from exc
    if not isinstance(raw, dict):
        raise CoordinationError(f"etcd answered with {raw!r}")
    return raw


def _error(path: str, url: str, raw: dict[str, Any]) -> CoordinationError:
    """The typed error for a gateway error body (unary ``{"code", "message"}`` or a
    stream's ``{"error": {"grpc_code", "message"}}``)."""
    detail = raw.get("error")
    if isinstance(detail, dict):
        code, message = _int(detail.get("grpc_code")), str(detail.get("message"))
    else:
        code, message = _int(raw.get("code")), str(raw.get("message") or detail)
    text = f"etcd refused {path} at {url}: {message} (gRPC code {code})"
    if code == GRPC_NOT_FOUND and "lease" in message:
        return LeaseExpired(text, code=code)
    if code == GRPC_UNAVAILABLE:
        return CoordinationUnavailable(text, code=code, maybe_applied=NO_LEADER not in message)
    return CoordinationError(text, code=code)


class Watch:
    """A watch etcd has confirmed: iterate it for :class:`WatchResponse`; :meth:`cancel`
    from any thread.

    Created by :meth:`EtcdClient.watch`, which returns only once etcd has confirmed the
    watch (within the client's ``timeout``): every change after ``start_revision`` will be
    delivered. Iterating raises :class:`~tuffdb.errors.CoordinationUnavailable` when the
    stream breaks (etcd died, the connection dropped) or stays silent past
    ``idle_timeout``, and :class:`~tuffdb.errors.CoordinationError` (with
    ``compact_revision``) when the start revision was compacted away or etcd cancelled
    the watch. Only :meth:`cancel` ends the iteration quietly.
    """

    def __init__(self, client: EtcdClient, body: dict[str, Any],
                 idle_timeout: float | None) -> None:
        self._cancelled = threading.Event()
        self._socket: socket.socket | None = None
        self._stack = contextlib.ExitStack()
        self.revision = 0  # the store's revision at the last message received
        try:
            self._messages = self._establish(client, body, idle_timeout)
        except httpx.TransportError as exc:
            self._stack.close()
            raise CoordinationUnavailable(f"etcd did not confirm a watch within "
                                          f"{client.timeout} s: {exc!r}") from exc
        except BaseException:
            self._stack.close()
            raise
        self.start_revision = self.revision  # changes after this one will be seen

    def _establish(self, client: EtcdClient, body: dict[str, Any],
                   idle_timeout: float | None) -> Iterator[dict[str, Any]]:
        """Open the stream on the first endpoint that accepts it and read etcd's
        confirmation (bounded by the client's timeout; later reads by ``idle_timeout``)."""
        failures = []
        for step in range(len(client.endpoints)):
            index = (client._current + step) % len(client.endpoints)  # noqa: SLF001
            url = client.endpoints[index] + "/v3/watch"
            try:
                response = self._stack.enter_context(client._http.stream(  # noqa: SLF001
                    "POST", url, json=body, timeout=client.timeout))
                break
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                failures.append(f"{url}: {exc!r}")  # a watch applies nothing: try the next
        else:
            raise CoordinationUnavailable(f"no etcd endpoint accepted a watch: "
                                          f"{'; '.join(failures)}")
        stream = response.extensions.get("network_stream")
        self._socket = stream.get_extra_info("socket") if stream is not None else None
        if response.status_code != 200:
            raise _error("/v3/watch", url, _json_bytes(response.read()))
        # The gateway sends its headers with etcd's first message (the confirmation), so
        # the client's timeout bounded the wait for it. The body's reads take their
        # timeout when the body is first read (httpcore): from here on, idle_timeout.
        response.request.extensions["timeout"]["read"] = idle_timeout
        messages = self._results(url, response)
        for result in messages:
            if result.get("created"):
                break
        return messages

    def _results(self, url: str, response: httpx.Response) -> Iterator[dict[str, Any]]:
        """Each ``result`` of the stream; errors and cancellations raise."""
        for line in response.iter_lines():
            if not line.strip():
                continue
            raw = _json_bytes(line.encode())
            if "error" in raw:
                raise _error("/v3/watch", url, raw)
            result: dict[str, Any] = raw.get("result", {})
            self.revision = max(self.revision, _revision(result))
            if result.get("canceled"):
                compacted = _int(result.get("compact_revision"))
                reason = result.get("cancel_reason") or (
                    f"{COMPACTED} (compacted up to {compacted})" if compacted else "")
                raise CoordinationError(f"etcd cancelled the watch: {reason}",
                                        code=GRPC_OUT_OF_RANGE if compacted else None,
                                        compact_revision=compacted or None)
            yield result
        if not self.cancelled:
            raise CoordinationUnavailable(f"etcd ended the watch stream at revision "
                                          f"{self.revision}")

    def cancel(self) -> None:
        """End the watch: the iterating thread's loop ends without an error."""
        self._cancelled.set()
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def __iter__(self) -> Iterator[WatchResponse]:
        try:
            for result in self._messages:
                yield WatchResponse(self.revision, tuple(
                    Event("DELETE" if e.get("type") == "DELETE" else "PUT",
                          KeyValue.decode(e.get("kv", {})),
                          KeyValue.decode(e["prev_kv"]) if e.get("prev_kv") else None)
                    for e in result.get("events") or ()))
        except httpx.TransportError as exc:
            if not self.cancelled:
                raise CoordinationUnavailable(
                    f"etcd watch stream broke at revision {self.revision}: {exc!r}") from exc
        except CoordinationUnavailable:
            if not self.cancelled:
                raise
        finally:
            self._stack.close()


def _json_bytes(data: bytes) -> dict[str, Any]:
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise CoordinationError(f"etcd sent non-JSON on a watch: {data[:200]!r}") from exc
    return raw if isinstance(raw, dict) else {"result": {}}
