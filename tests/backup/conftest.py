"""Targets for the backup and archive tests: a directory, and an S3 endpoint served by
moto (``ThreadedMotoServer`` on a free port, started here), reached only through boto3
over HTTP with the usual AWS environment variables; optionally through a fault-injecting
HTTP proxy. The code under test has no idea which S3 it is talking to.
"""

from __future__ import annotations

import http.client
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tuffdb.testing.etcd import free_port


class FaultProxy:
    """Forwards HTTP to ``upstream``; ``fail`` answers the next N requests with a 503
    SlowDown, ``stall_s`` holds each request that long first, ``down`` fails all."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.fail = 0
        self.down = False
        self.stall = threading.Event()  # set: requests wait until it is cleared
        self.seen = 0
        self.failed = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                proxy.seen += 1
                while proxy.stall.is_set():
                    threading.Event().wait(0.05)  # held like a slow endpoint would hold it
                if proxy.down or proxy.fail > 0:
                    proxy.fail = max(0, proxy.fail - 1)
                    proxy.failed += 1
                    msg = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                           b"<Message>injected</Message></Error>")
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stall.clear()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def moto_port() -> Iterator[int]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield port
    server.stop()


def s3_env(port: int) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}


@pytest.fixture
def bucket(moto_port: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh bucket; the AWS environment points boto3 at the moto endpoint."""
    for k, v in s3_env(moto_port).items():
        monkeypatch.setenv(k, v)
    name = f"t-{uuid.uuid4().hex[:20]}"
    boto3.client("s3").create_bucket(Bucket=name)
    yield name


@pytest.fixture
def proxy(moto_port: int, monkeypatch: pytest.MonkeyPatch, bucket: str) -> Iterator[FaultProxy]:
    """A fault proxy in front of moto; boto3 goes through it."""
    p = FaultProxy(moto_port)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{p.port}")
    yield p
    p.close()


@pytest.fixture(params=["dir", "s3"])
def target_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A backup/archive URL: a directory, or s3:// on moto."""
    if request.param == "dir":
        return str(tmp_path / "target")
    name = request.getfixturevalue("bucket")
    return f"s3://{name}/tuffdb"


def all_objects(url: str) -> dict[str, bytes]:
    """Every object under a target, for tests that inspect or damage the bucket."""
    from tuffdb.storage.objstore import open_target

    t = open_target(url)
    return {k: t.get(k)[0] for k, _ in t.list("")}


def put_raw(url: str, key: str, data: bytes | None) -> None:
    """Overwrite (or delete, with None) an object behind the code's back."""
    from tuffdb.storage.objstore import open_target

    t = open_target(url)
    if data is None:
        t.delete([key])
    else:
        t.put(key, data)


__all__ = ["FaultProxy", "all_objects", "free_port", "os", "put_raw", "s3_env"]
