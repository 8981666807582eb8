"""Broken, slow and hostile clients: protocol errors, non-readers, idlers, garbage.

The promise: malformed input gets Redis's protocol error and the connection closed; a
client that never reads its replies cannot stall the others or grow our memory without
bound; the server never crashes on input.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tuffdb.server.resp._process import ServerProcess, redis_server_path, start_redis, start_tuffdb


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_tuffdb(Path(tmp_path_factory.mktemp("resp-hostile")), "--timeout", "2",
                        "--proto-max-bulk-len", str(4 * 1024 * 1024))
    yield proc
    assert proc.stop() == 0


def send_and_read_until_close(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        return got


BAD_INPUTS = {
    "bad_multibulk": (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    "huge_multibulk": (b"*99999999\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    "not_a_bulk": (b"*1\r\n:5\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
    "bad_bulk_len": (b"*1\r\n$-3\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    "unbalanced": (b'SET "a\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    "good_then_bad": (b"PING\r\n*1\r\n$x\r\n",
                      b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_protocol_error_replies_and_closes(server: ServerProcess, name: str) -> None:
    data, expected = BAD_INPUTS[name]
    assert send_and_read_until_close(server.port, data) == expected


@pytest.mark.skipif(redis_server_path() is None, reason="redis-server is not installed")
def test_protocol_errors_match_redis_byte_for_byte(server: ServerProcess) -> None:
    redis_proc = start_redis()
    try:
        for name, (data, _) in BAD_INPUTS.items():
            if name == "huge_multibulk":
                continue  # Redis waits (it allows 2**31 args once authenticated); we refuse
            assert send_and_read_until_close(server.port, data) == \
                send_and_read_until_close(redis_proc.port, data)
    finally:
        redis_proc.stop()


def test_bulk_over_proto_max_bulk_len_is_refused_before_it_is_buffered(
        server: ServerProcess) -> None:
    data = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (64 * 1024 * 1024)
    assert send_and_read_until_close(server.port, data) == \
        b"-ERR Protocol error: invalid bulk length\r\n"


def test_client_that_never_reads_does_not_stall_others_or_buffer_everything(
        server: ServerProcess) -> None:
    c = redis.Redis(port=server.port)
    c.set("big", b"x" * (1024 * 1024))
    hog = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 2000  # 2 GB of replies if all ran
    hog.setblocking(False)
    sent = 0
    try:
        while sent < len(request):
            sent += hog.send(request[sent:])
    except BlockingIOError:
        pass  # the server stopped reading from us: back-pressure works
    # Everyone else is served meanwhile, and the hog's pending output stays bounded.
    for i in range(50):
        assert c.set(f"k{i}", i) and c.get(f"k{i}") == str(i).encode()
    hog_line = next(x for x in c.client_list() if int(x["id"]) != c.client_id()
                    and int(x["omem"]) > 0)
    assert int(hog_line["omem"]) < 64 * 1024 * 1024
    hog.close()
    c.close()


def test_idle_client_is_disconnected_after_timeout(server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b"PING\r\n")
        assert s.recv(100) == b"+PONG\r\n"
        assert s.recv(100) == b""  # closed by the server (timeout 2 s), not by us


def test_random_garbage_never_takes_the_server_down(server: ServerProcess) -> None:
    rng = random.Random(1234)
    for _ in range(40):
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 400)))
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
    c = redis.Redis(port=server.port)
    assert c.ping()
    c.close()


def test_inline_commands_work_like_redis_cli_telnet(server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(b'SET greeting "hello world"\r\nGET greeting\r\nQUIT\r\n')
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got == b"+OK\r\n$11\r\nhello world\r\n+OK\r\n"


def test_subscriber_that_stops_reading_is_dropped_at_the_pubsub_limit(
        server: ServerProcess) -> None:
    c = redis.Redis(port=server.port)
    old = c.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    c.config_set("client-output-buffer-limit", "pubsub 262144 0 0")
    try:
        sub = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sub.sendall(b"SUBSCRIBE firehose\r\n")
        assert sub.recv(100).startswith(b"*3\r\n$9\r\nsubscribe")
        payload = b"m" * 65536
        receivers = [c.publish("firehose", payload) for _ in range(400)]  # 26 MB
        assert receivers[0] == 1
        assert receivers[-1] == 0  # dropped long before the end
        assert c.pubsub_numsub("firehose") == [(b"firehose", 0)]
        sub.close()
    finally:
        c.config_set("client-output-buffer-limit", old)
        c.close()


@pytest.mark.parametrize("command", ["SET", "HSET", "LPUSH", "SADD", "XADD"])
def test_a_pipeline_with_a_key_over_the_limit_answers_every_command(
        server: ServerProcess, command: str) -> None:
    """A pipeline of one command (run as one batch) where the store refuses one key
    (over 65,535 bytes): that command gets an error, the others are written, and the
    connection carries on, as when the same commands arrive one by one."""
    long_key = "k" * 70_000
    args = {"SET": ("v",), "HSET": ("f", "v"), "LPUSH": ("v",), "SADD": ("v",),
            "XADD": ("*", "f", "v")}[command]
    c = redis.Redis(port=server.port)
    try:
        keys = [f"{command}-1", long_key, f"{command}-2"]
        pipe = c.pipeline(transaction=False)
        for k in keys:
            pipe.execute_command(command, k, *args)
        got = pipe.execute(raise_on_error=False)
        assert isinstance(got[1], redis.ResponseError)
        assert not isinstance(got[0], Exception)
        assert not isinstance(got[2], Exception)
        assert c.exists(keys[0], keys[2]) == 2
        assert not c.exists(long_key)
        assert c.ping()
    finally:
        c.close()


@pytest.mark.parametrize(("point", "written"), [("resp_batch", False),
                                                ("resp_batch_done", True)])
def test_a_batch_form_that_fails_unexpectedly_keeps_the_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, written: bool) -> None:
    """A batch form (a pipeline of one command run in one call) that raises something
    other than a tuffdb error, as a bug would (a failpoint raising OSError): the connection
    stays open and no command is applied twice. Before it wrote anything, the commands run
    one by one and each gets its own reply; after, every one is answered with the error."""
    monkeypatch.setenv("TUFFDB_FAILPOINTS", f"{point}=raise")
    proc = start_tuffdb(tmp_path)
    c = redis.Redis(port=proc.port)
    try:
        pipe = c.pipeline(transaction=False)
        for _ in range(4):
            pipe.rpush("queue", "job")
        got = pipe.execute(raise_on_error=False)
        if written:
            assert all(isinstance(r, redis.ResponseError) and "internal error" in str(r)
                       for r in got), got
        else:
            assert got == [1, 2, 3, 4]
        assert c.llen("queue") == 4  # written once, whichever way it was answered
        assert c.ping()
    finally:
        c.close()
        assert proc.stop() == 0
