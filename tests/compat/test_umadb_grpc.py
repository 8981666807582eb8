"""The real ``umadb`` 0.7.8 client against our umadb.v1.DCB face in a server subprocess.

Every RPC, the read-head table of spec section 4.6, every error code, streams under
cancel, concurrent conditional writers, and raw malformed input that must be rejected
without writing anything while the server keeps serving.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
import umadb

from tuffdb.events import umadb_v1_pb2 as pb


class Server:
    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuffdb.server.umadb", "--port", "0",
             "--data-dir", str(data_dir), *extra],
            stderr=subprocess.PIPE, text=True,
        )
        self.port = 0
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # the ready line is the synchronisation point
            if "listening on" in line:
                self.port = int(line.rsplit(":", 1)[1])
            if "UmaDB started" in line:
                break
        else:
            raise RuntimeError(f"server exited with {self.proc.wait()}")
        self.url = f"http://127.0.0.1:{self.port}"

    def client(self, **kw: object) -> umadb.Client:
        return umadb.Client(url=self.url, **kw)

    def stop(self) -> int:
        self.proc.terminate()
        rc = self.proc.wait(30)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return rc


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "events")
    yield s
    assert s.stop() == 0


@pytest.fixture
def client(server: Server) -> umadb.Client:
    return server.client()


def E(t: str = "t", data: bytes = b"", tags: list[str] | None = None, **kw: object) -> umadb.Event:  # noqa: N802
    return umadb.Event(event_type=t, data=data, tags=tags or [], **kw)


def Q(*items: tuple[list[str], list[str]]) -> umadb.Query:  # noqa: N802
    return umadb.Query(items=[umadb.QueryItem(types=t, tags=g) for t, g in items])


def pos(events: object) -> list[int]:
    return [e.position for e in events]  # type: ignore[attr-defined]


def test_head_of_empty_store_is_absent(client: umadb.Client) -> None:
    assert client.head() is None


def test_append_returns_last_position_and_read_round_trips(client: umadb.Client) -> None:
    u = uuid.uuid4()
    assert client.append([E("A", b"x", ["a", "b"], uuid=u, metadata={"k": "v", "j": "w"})]) == 1
    assert client.append([E("B"), E("C", b"\x00" * 1000)]) == 3
    events = list(client.read())
    assert pos(events) == [1, 2, 3]
    e = events[0].event
    assert (e.event_type, e.data, e.tags, e.uuid, e.metadata) == (
        "A", b"x", ["a", "b"], u, {"k": "v", "j": "w"})
    assert events[2].event.data == b"\x00" * 1000
    assert client.head() == 3


def test_read_start_inclusive_and_backwards(client: umadb.Client) -> None:
    client.append([E(), E(), E()])
    assert pos(client.read(start=2)) == [2, 3]
    assert pos(client.read(start=2, backwards=True)) == [2, 1]
    assert pos(client.read(backwards=True, limit=2)) == [3, 2]


def test_read_head_table(server: Server) -> None:
    c = server.client(batch_size=2)
    r = c.read()
    assert (list(r), r.head()) == ([], None)
    c.append([E(tags=["x"]), E(), E(), E(), E()])
    r = c.read()
    assert (pos(r), r.head()) == ([1, 2, 3, 4, 5], 5)
    r = c.read(limit=3)
    assert (pos(r), r.head()) == ([1, 2, 3], 3)
    r = c.read(query=Q(([], ["none"])))
    assert (pos(r), r.head()) == ([], 5)
    r = c.read(query=Q(([], ["none"])), limit=3)
    assert (pos(r), r.head()) == ([], None)
    r = c.read(limit=0)
    assert (pos(r), r.head()) == ([], None)
    r = c.read(query=Q(([], ["x"])))
    assert (pos(r), r.head()) == ([1], 5)


def test_query_semantics_over_the_wire(client: umadb.Client) -> None:
    client.append([E("A", tags=["x", "y"]), E("B", tags=["x"]), E("C", tags=["y"]), E("A")])
    assert pos(client.read(Q((["A"], [])))) == [1, 4]
    assert pos(client.read(Q(([], ["x", "y"])))) == [1]
    assert pos(client.read(Q((["B"], ["x"]), (["C"], [])))) == [2, 3]
    assert pos(client.read(umadb.Query(items=[umadb.QueryItem()]))) == [1, 2, 3, 4]


def test_condition_failure_is_integrity_error_and_consumes_no_position(
    client: umadb.Client,
) -> None:
    client.append([E(tags=["x"])])
    cond = umadb.AppendCondition(fail_if_events_match=Q(([], ["x"])), after=0)
    with pytest.raises(umadb.IntegrityError):
        client.append([E()], condition=cond)
    with pytest.raises(umadb.IntegrityError):
        client.append([E()], condition=umadb.AppendCondition(fail_if_events_match=umadb.Query(items=[])))
    ok = umadb.AppendCondition(fail_if_events_match=Q(([], ["x"])), after=1)
    assert client.append([E()], condition=ok) == 2


def test_idempotent_retry_returns_same_position(client: umadb.Client) -> None:
    client.append([E()] * 5)
    cond = umadb.AppendCondition(fail_if_events_match=Q(([], ["acc"])), after=5)
    evs = [E(tags=["acc"], uuid=uuid.uuid4()), E(tags=["acc"], uuid=uuid.uuid4())]
    assert client.append(evs, condition=cond) == 7
    assert client.append(evs, condition=cond) == 7
    assert client.head() == 7


def test_tracking_info(client: umadb.Client) -> None:
    assert client.get_tracking_info("up") is None
    client.append([E()], tracking_info=umadb.TrackingInfo("up", 5))
    assert client.get_tracking_info("up") == 5
    with pytest.raises(umadb.IntegrityError, match="non-increasing tracking position"):
        client.append([E()], tracking_info=umadb.TrackingInfo("up", 5))
    assert client.append([], tracking_info=umadb.TrackingInfo("up", 9)) == 0
    assert client.get_tracking_info("up") == 9
    (e,) = client.read()
    assert (e.tracking_info.source, e.tracking_info.position) == ("up", 5)
    with pytest.raises(ValueError):  # noqa: PT011 (the client maps INVALID_ARGUMENT to ValueError)
        client.append([E()], tracking_info=umadb.TrackingInfo("s" * 256, 10))
    assert client.head() == 1


def test_empty_append_with_failing_condition_does_not_crash(client: umadb.Client) -> None:
    client.append([E()])
    with pytest.raises(umadb.IntegrityError):
        client.append([], condition=umadb.AppendCondition(fail_if_events_match=umadb.Query(items=[])))
    assert client.head() == 1


def test_oversized_tag_is_invalid_argument(client: umadb.Client) -> None:
    with pytest.raises(ValueError, match="invalid argument"):
        client.append([E(tags=["t" * 70_000])])
    assert client.head() is None


def test_large_events_round_trip_and_responses_stay_under_4_mib(client: umadb.Client) -> None:
    big = bytes(1_000_000)
    for _ in range(6):
        client.append([E(data=big)])
    events = list(client.read())
    assert pos(events) == [1, 2, 3, 4, 5, 6]
    assert all(e.event.data == big for e in events)


def test_subscribe_catches_up_then_receives_live(client: umadb.Client) -> None:
    client.append([E(), E(), E()])
    sub = client.subscribe(after=1)
    assert [next(sub).position, next(sub).position] == [2, 3]
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(next(sub).position))
    t.start()
    client.append([E()])
    t.join(30)
    assert got == [4]
    sub.cancel()


def test_subscribe_with_query_filters(client: umadb.Client) -> None:
    sub = client.subscribe(query=Q(([], ["x"])))
    client.append([E(), E(tags=["x"])])
    assert next(sub).position == 2
    sub.cancel()


def test_cancelled_streams_leave_the_server_serving(client: umadb.Client) -> None:
    client.append([E(data=bytes(1000))] * 3000)
    for _ in range(5):
        r = client.read()
        next(r)
        r.cancel()
    sub = client.subscribe()
    next(sub)
    sub.cancel()
    assert client.head() == 3000
    assert len(list(client.read())) == 3000


def test_concurrent_conditional_writers_one_winner_per_round(server: Server) -> None:
    writers, rounds = 8, 10
    clients = [server.client() for _ in range(writers)]
    for r in range(rounds):
        head = r
        barrier = threading.Barrier(writers)
        results: list[object] = []

        def go(c: umadb.Client, head: int = head, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            cond = umadb.AppendCondition(fail_if_events_match=Q(([], ["k"])), after=head)
            try:
                results.append(c.append([E(tags=["k"])], condition=cond))
            except umadb.IntegrityError as exc:
                results.append(exc)

        ts = [threading.Thread(target=go, args=(c,)) for c in clients]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert [x for x in results if isinstance(x, int)] == [r + 1]
    assert pos(clients[0].read()) == list(range(1, rounds + 1))


def test_health_is_serving(client: umadb.Client) -> None:
    assert client.check_health() == umadb.ServingStatus.SERVING
    assert client.check_health("umadb.v1.DCB") == umadb.ServingStatus.SERVING


# -- raw wire input (our own generated messages on a plain grpc channel) ---------------------
@pytest.fixture
def channel(server: Server) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


def raw_call(ch: grpc.Channel, path: str, body: bytes) -> grpc.RpcError:
    call = ch.unary_unary(path)
    with pytest.raises(grpc.RpcError) as info:
        call(body, timeout=30)
    return info.value


def details(err: grpc.RpcError) -> pb.ErrorResponse:
    md = dict(err.trailing_metadata() or ())  # type: ignore[attr-defined]
    return pb.ErrorResponse.FromString(md["grpc-status-details-bin"])


def head(ch: grpc.Channel) -> int | None:
    resp = pb.HeadResponse.FromString(ch.unary_unary("/umadb.v1.DCB/Head")(b"", timeout=30))
    return resp.position if resp.HasField("position") else None


def test_malformed_protobuf_is_invalid_argument(channel: grpc.Channel) -> None:
    err = raw_call(channel, "/umadb.v1.DCB/Append", b"\x0a\xff\xff\xff")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(err).error_type == pb.ErrorResponse.SERIALIZATION
    assert head(channel) is None


def test_duplicate_metadata_keys_are_invalid_argument(channel: grpc.Channel) -> None:
    ev = pb.Event(event_type="t", metadata=[pb.MetadataEntry(key="a", value="1"),
                                            pb.MetadataEntry(key="a", value="2")])
    err = raw_call(channel, "/umadb.v1.DCB/Append", pb.AppendRequest(events=[ev]).SerializeToString())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(err).error_type == pb.ErrorResponse.INVALID_ARGUMENT
    assert "duplicate keys" in details(err).message
    assert head(channel) is None


def test_invalid_uuid_is_invalid_argument(channel: grpc.Channel) -> None:
    req = pb.AppendRequest(events=[pb.Event(event_type="t", uuid="zzz")])
    err = raw_call(channel, "/umadb.v1.DCB/Append", req.SerializeToString())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert head(channel) is None


def test_integrity_error_carries_error_response_trailer(channel: grpc.Channel) -> None:
    channel.unary_unary("/umadb.v1.DCB/Append")(
        pb.AppendRequest(events=[pb.Event(event_type="t")]).SerializeToString(), timeout=30)
    req = pb.AppendRequest(events=[pb.Event(event_type="t")],
                           condition=pb.AppendCondition(after=0))
    err = raw_call(channel, "/umadb.v1.DCB/Append", req.SerializeToString())
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    d = details(err)
    assert d.error_type == pb.ErrorResponse.INTEGRITY
    assert d.message.startswith("integrity error: condition failed")


def test_oversized_request_is_rejected_and_nothing_written(channel: grpc.Channel) -> None:
    req = pb.AppendRequest(events=[pb.Event(event_type="t", data=bytes(5_000_000))])
    err = raw_call(channel, "/umadb.v1.DCB/Append", req.SerializeToString())
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert head(channel) is None


def test_unknown_path_is_unimplemented(channel: grpc.Channel) -> None:
    err = raw_call(channel, "/umadb.v1.DCB/Nope", b"")
    assert err.code() == grpc.StatusCode.UNIMPLEMENTED
    assert head(channel) is None


def test_read_with_subscribe_flag_is_invalid_argument(channel: grpc.Channel) -> None:
    call = channel.unary_stream("/umadb.v1.DCB/Read")
    with pytest.raises(grpc.RpcError) as info:
        list(call(pb.ReadRequest(subscribe=True).SerializeToString(), timeout=30))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_legacy_service_paths(channel: grpc.Channel) -> None:
    channel.unary_unary("/umadb.UmaDBService/Append")(
        pb.AppendRequest(events=[pb.Event(event_type="t")]).SerializeToString(), timeout=30)
    resp = channel.unary_unary("/umadb.UmaDBService/Head")(b"", timeout=30)
    assert pb.HeadResponse.FromString(resp).position == 1


def test_limit_zero_sends_no_messages(channel: grpc.Channel) -> None:
    call = channel.unary_stream("/umadb.v1.DCB/Read")
    assert list(call(pb.ReadRequest(limit=0).SerializeToString(), timeout=30)) == []


@pytest.mark.slow
@pytest.mark.once  # 32 s of idling: the compiled pass (the build `serve` runs) is enough
def test_subscription_idle_over_30_seconds_still_delivers(client: umadb.Client) -> None:
    """The client pings every 5 s; grpcio's defaults would GOAWAY it after ~20 s idle."""
    sub = client.subscribe()
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(next(sub).position))
    t.start()
    t.join(32)  # the idle period under test, not a synchronisation
    assert t.is_alive(), "the subscription ended while idle (next() returned or raised)"
    assert got == []
    assert client.append([E()]) == 1
    t.join(30)
    assert got == [1]
    sub.cancel()


def test_equal_length_batches_with_tracking_round_trip(client: umadb.Client) -> None:
    """Exercises the raw-rows fast path of the append decoder (equal-length events)."""
    evs = [E("T", bytes([i]) * 30, ["a", f"k{i:02d}"], uuid=uuid.uuid4()) for i in range(12)]
    assert client.append(evs, tracking_info=umadb.TrackingInfo("src", 1)) == 12
    got = list(client.read())
    assert [(g.event.data, g.event.tags, g.event.uuid) for g in got] == [
        (e.data, e.tags, e.uuid) for e in evs]
    assert all(g.tracking_info.position == 1 for g in got)
    assert pos(client.read(Q(([], ["k07"])))) == [8]


def test_uppercase_uuids_in_a_batch_come_back_canonical(channel: grpc.Channel) -> None:
    us = [uuid.uuid4() for _ in range(10)]
    req = pb.AppendRequest(events=[pb.Event(event_type="t", data=b"x" * 5, uuid=str(u).upper())
                                   for u in us])
    channel.unary_unary("/umadb.v1.DCB/Append")(req.SerializeToString(), timeout=30)
    body = b"".join(channel.unary_stream("/umadb.v1.DCB/Read")(b"", timeout=30))
    got = [se.event.uuid for se in pb.ReadResponse.FromString(body).events]
    assert got == [str(u) for u in us]


def test_near_4_mib_event_round_trips(client: umadb.Client) -> None:
    big = bytes(3_900_000)
    assert client.append([E(data=big)]) == 1
    (e,) = client.read()
    assert e.event.data == big


def test_health_watch_reports_not_serving_at_shutdown(tmp_path: Path) -> None:
    s = Server(tmp_path / "events")
    c = s.client()  # keep the client: dropping it cancels its streams
    watch = c.watch_health()
    assert next(watch) == umadb.ServingStatus.SERVING
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(next(watch, None)))
    t.start()
    assert s.stop() == 0
    t.join(30)
    assert got == [umadb.ServingStatus.NOT_SERVING]


# -- hostile HTTP/2 on a raw socket (server/umadb/grpc_h2.py): only that connection suffers -------
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype: int, flags: int, sid: int, payload: bytes) -> bytes:
    return struct.pack(">IBI", len(payload) << 8 | ftype, flags, sid) + payload


def read_frames(sock: socket.socket, until: Callable[[int, int, int, bytes], bool]) -> list[
    tuple[int, int, int, bytes]
]:
    """Frames from ``sock`` up to the first for which ``until`` is true (or EOF)."""
    buf = b""
    out = []
    while True:
        while len(buf) >= 9:
            lt, flags, sid = struct.unpack_from(">IBI", buf)
            n = lt >> 8
            if len(buf) < 9 + n:
                break
            f = (lt & 0xFF, flags, sid & 0x7FFFFFFF, buf[9 : 9 + n])
            buf = buf[9 + n :]
            out.append(f)
            if until(*f):
                return out
        data = sock.recv(1 << 16)
        if not data:
            return out
        buf += data


def goaway_code(frames: list[tuple[int, int, int, bytes]]) -> int | None:
    codes = [struct.unpack_from(">II", p)[1] for t, _, _, p in frames if t == 7]
    return codes[-1] if codes else None


def is_goaway(t: int, *_: object) -> bool:
    return t == 7


@pytest.mark.parametrize(("send", "code"), [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1),  # not a preface: PROTOCOL_ERROR
    (PREFACE + struct.pack(">IBI", 0xFFFFFF << 8 | 0, 0, 1), 6),  # 16 MiB frame: FRAME_SIZE
    (PREFACE + frame(4, 0, 0, b"") + frame(1, 0x5, 1, b"\x80"), 9),  # HPACK index 0
    (PREFACE + frame(4, 0, 0, b"") + frame(6, 0, 0, b"short"), 1),  # PING of 5 bytes
    (PREFACE + frame(4, 0, 0, b"") + frame(1, 0x5, 2, b"\x82"), 1),  # even stream id
])
def test_malformed_http2_gets_goaway_and_the_server_keeps_serving(
    server: Server, send: bytes, code: int
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(send)
        frames = read_frames(s, is_goaway)
    assert goaway_code(frames) == code
    assert server.client().append([E("after")]) >= 1


def test_unfinished_requests_are_bounded_per_connection(server: Server) -> None:
    """17 calls each holding 4 MiB of request body, none finished: past 64 MiB buffered
    the call that overflows gets RESOURCE_EXHAUSTED; nothing is written."""
    from tuffdb.server.umadb.hpack_codec import Decoder, encode  # noqa: PLC0415

    block = encode([(b":method", b"POST"), (b":scheme", b"http"), (b":authority", b"x"),
                    (b":path", b"/umadb.v1.DCB/Append"),
                    (b"content-type", b"application/grpc"), (b"te", b"trailers")])
    body = struct.pack(">BI", 0, 4 << 20) + bytes((4 << 20) - 5)  # 4 MiB: within the limit
    data = [body[i : i + 16384] for i in range(0, len(body), 16384)]
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(PREFACE + frame(4, 0, 0, b""))
        for k in range(17):
            sid = 1 + 2 * k
            s.sendall(frame(1, 0x4, sid, block))  # END_HEADERS, the body never ends
            s.sendall(b"".join(frame(0, 0, sid, d) for d in data))
        frames = read_frames(s, lambda t, fl, sid, _p: t == 1 and sid == 33 and fl & 1 > 0)
    trailers = [p for t, _, sid, p in frames if t == 1 and sid == 33]
    assert trailers, frames[-3:]
    fields = dict(Decoder().decode(trailers[-1]))
    assert fields[b"grpc-status"] == b"8"  # RESOURCE_EXHAUSTED
    assert b"unfinished requests" in fields[b"grpc-message"]
    assert server.client().head() is None  # nothing was written
