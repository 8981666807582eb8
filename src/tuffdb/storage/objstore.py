"""Where backups and archives live: a directory or an S3-compatible bucket, behind one
small interface with conditional writes (spec of what we write: docs/format/backup.md).

* :class:`DirStore` (a path, or ``file:///path``): objects are files under the root.
  ``if_none_match`` is an atomic create (``link(2)`` of a finished temporary file, which
  fails if the name exists); ``if_match`` compares and replaces under an exclusive
  ``flock`` on ``<root>/.lock``, so two processes on one host serialise. ETags are
  ``<crc32c>-<size>`` of the content.
* :class:`S3Store` (``s3://bucket/prefix``): boto3, the field's standard client, with the
  usual AWS configuration (environment, ``~/.aws/config``, instance roles; an endpoint
  from ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` for MinIO, R2, Ceph). Conditional
  writes are S3's own ``If-None-Match: *`` and ``If-Match: <etag>`` on PutObject and
  CompleteMultipartUpload. boto3 is sync and thread-safe per client: the archiver calls
  it from its own thread, never from the event loop. Nothing here knows which S3 it is.

Errors: a missing object raises :class:`ObjectMissing` (naming it); a lost conditional
write raises :class:`PreconditionFailed`; anything transient (network, timeouts, 5xx,
throttling) raises :class:`TransientError`, which callers retry with backoff.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlparse

from tuffdb._format.checksum import crc32c, crc32c_extend
from tuffdb.errors import CorruptionError, NotFoundError, OperationalError, ProgrammingError
from tuffdb.storage.copy import Throttle, copy_file, file_crc
from tuffdb.storage.files import fsync_dir, fsync_fd, pread_exact, sync_filesystem, write_all

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MULTIPART_THRESHOLD = 64 << 20
#: Seconds before a silent S3 request counts as failed (env TUFFDB_S3_TIMEOUT_S overrides).
S3_TIMEOUT_S = 20.0
PART_SIZE = 16 << 20
_READ_CHUNK = 4 << 20
_RANGE_BYTES = 16 << 20
T = TypeVar("T")


class ObjectMissing(NotFoundError):
    """An object that should exist does not; the message names it."""


class PreconditionFailed(OperationalError):
    """A conditional write lost: the object exists (If-None-Match) or changed (If-Match)."""


class TransientError(OperationalError):
    """The object store failed in a way worth retrying (network, timeout, 5xx, throttling)."""


class ObjectStore(Protocol):
    url: str

    def put(self, key: str, data: bytes, *, if_none_match: bool = False,
            if_match: str | None = None) -> str: ...

    def deferred_sync(self) -> contextlib.AbstractContextManager[None]:
        """Objects written inside become durable together when it ends without an
        error (before that, any of them may be lost in a crash): for many objects
        written at once, whose completion something written afterwards records."""
        ...

    def put_file(self, key: str, path: Path, *, size: int | None = None, link: bool = False,
                 if_none_match: bool = False, crc: bool = True,
                 throttle: Throttle | None = None) -> tuple[int, int]:
        """Upload the first ``size`` bytes of ``path`` (all of it by default); return
        their (crc32c, size). ``link``: a directory target may hard-link the file instead
        of copying it (immutable files only). ``crc=False``: the caller checksums the file
        itself (the CRC returned may be 0). ``throttle``: at most its rate."""
        ...

    def get(self, key: str) -> tuple[bytes, str]: ...

    def get_file(self, key: str, path: Path, *, crc: bool = True) -> tuple[int, int]:
        """Download ``key`` into a new file ``path`` (fsynced); return the (crc32c, size)
        of the bytes written (``crc=False``: the CRC may be 0; the caller checks)."""
        ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``key`` (fewer when it is shorter)."""
        ...

    def head(self, key: str) -> str | None: ...

    def list(self, prefix: str) -> list[tuple[str, int]]: ...

    def delete(self, keys: builtins.list[str]) -> None: ...


def open_target(url: str | os.PathLike[str]) -> ObjectStore:
    """The object store for ``url``: ``s3://bucket[/prefix]``, ``file:///path`` or a path.

    :raises ProgrammingError: an unknown URL scheme.
    """
    text = os.fspath(url)
    parsed = urlparse(text)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise ProgrammingError(f"{text}: an S3 URL is s3://bucket[/prefix]")
        return S3Store(parsed.netloc, parsed.path.strip("/"))
    if parsed.scheme == "file":
        return DirStore(Path(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise ProgrammingError(f"{text}: unknown scheme {parsed.scheme!r} (use a path, "
                               "file:///path or s3://bucket/prefix)")
    return DirStore(Path(text))


_SHARED: dict[tuple[str, ...], ObjectStore] = {}
_SHARED_MU = threading.Lock()


def shared_target(url: str) -> ObjectStore:
    """:func:`open_target` for readers that come back often (tiered reads, remote files):
    one client per URL and S3 endpoint setting for the process."""
    key = (url, os.environ.get("AWS_ENDPOINT_URL", ""), os.environ.get("AWS_ENDPOINT_URL_S3", ""))
    with _SHARED_MU:
        target = _SHARED.get(key)
        if target is None:
            target = _SHARED[key] = open_target(url)
        return target


def object_crc(target: ObjectStore, key: str, size: int) -> int:
    """CRC-32C of object ``key``, read back in ranges (it must be ``size`` bytes long).

    :raises CorruptionError: it is shorter or longer.
    """
    crc = 0
    for off in range(0, size, _RANGE_BYTES):
        buf = target.get_range(key, off, min(size, off + _RANGE_BYTES))
        if len(buf) != min(size, off + _RANGE_BYTES) - off:
            raise CorruptionError(f"{target.url}/{key} is shorter than {size} bytes",
                                  path=f"{target.url}/{key}")
        crc = crc32c_extend(crc, buf)
    if target.get_range(key, size, size + 1):
        raise CorruptionError(f"{target.url}/{key} is longer than {size} bytes",
                              path=f"{target.url}/{key}")
    return crc


def _chunks(path: Path, size: int | None, state: list[int],
            chunk: int = _READ_CHUNK) -> Iterator[bytes]:
    """The first ``size`` bytes of ``path`` (all by default) in chunks; ``state`` ends as
    [crc32c, bytes]."""
    left = -1 if size is None else size
    with path.open("rb") as f:
        while left:
            buf = f.read(chunk if left < 0 else min(left, chunk))
            if not buf:
                if left > 0:
                    raise CorruptionError(f"{path} is shorter than {size} bytes", path=str(path))
                return
            state[0] = crc32c_extend(state[0], buf)
            state[1] += len(buf)
            if left > 0:
                left -= len(buf)
            yield buf


def etag_of(data: bytes) -> str:
    return f"{crc32c(data):08x}-{len(data)}"


class DirStore:
    """Objects as files under ``root`` (created on the first write)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).absolute()
        self.url = str(self.root)
        self._tmp = 0
        self._mu = threading.Lock()
        self._deferred = 0  # open deferred_sync() blocks: no fsync per file and directory

    @contextlib.contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """No fsync of every file and of its directory: one ``syncfs`` of the target's
        file system at the end. A backup writes hundreds of files, and an fsync of
        each and of its directory is a cache flush each (measured with direct writes:
        a backup beside a loaded server went from 443 to 629 MB/s without them;
        docs/design/backup.md)."""
        with self._mu:
            self._deferred += 1
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._mu:
                self._deferred -= 1
            if ok:
                self.root.mkdir(parents=True, exist_ok=True)
                sync_filesystem(self.root)

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ProgrammingError(f"bad object key {key!r}")
        return self.root / key

    def _temp(self, path: Path) -> Path:
        with self._mu:
            self._tmp += 1
            n = self._tmp
        return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{n}.tmp")

    def _write_temp(self, path: Path, fill: Callable[[int], T]) -> tuple[Path, T]:
        """A new temporary file beside ``path``, written by ``fill(fd)`` and fsynced;
        returns it and what ``fill`` returned (removed again if anything fails)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._temp(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            out = fill(fd)
            if not self._deferred:
                fsync_fd(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return tmp, out

    def _publish(self, tmp: Path, path: Path, *, if_none_match: bool,
                 if_match: str | None) -> None:
        try:
            if if_none_match:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    raise PreconditionFailed(f"{self.url}/{path.relative_to(self.root)} "
                                             "exists already") from None
                tmp.unlink()
            elif if_match is not None:
                with self._locked():
                    current = self.head(str(path.relative_to(self.root)))
                    if current != if_match:
                        raise PreconditionFailed(
                            f"{self.url}/{path.relative_to(self.root)} changed "
                            f"(etag {current}, expected {if_match})")
                    tmp.replace(path)
            else:
                tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
        if not self._deferred:
            fsync_dir(path.parent)

    @contextlib.contextmanager
    def _locked(self) -> Any:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def put(self, key: str, data: bytes, *, if_none_match: bool = False,
            if_match: str | None = None) -> str:
        path = self._path(key)
        tmp, _ = self._write_temp(path, lambda fd: write_all(fd, data))
        self._publish(tmp, path, if_none_match=if_none_match, if_match=if_match)
        return etag_of(data)

    def put_file(self, key: str, path: Path, *, size: int | None = None, link: bool = False,
                 if_none_match: bool = False, crc: bool = True,
                 throttle: Throttle | None = None) -> tuple[int, int]:
        dst = self._path(key)
        if link and size is None:
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._temp(dst)
            try:
                os.link(path, tmp)
            except OSError:
                pass  # another file system: copy
            else:
                got = file_crc(Path(path)) if crc else (0, os.stat(tmp).st_size)
                self._publish(tmp, dst, if_none_match=if_none_match, if_match=None)
                return got
        tmp, got = self._write_temp(dst, lambda fd: copy_file(Path(path), fd, size, crc=crc,
                                                             throttle=throttle))
        self._publish(tmp, dst, if_none_match=if_none_match, if_match=None)
        return got

    def get(self, key: str) -> tuple[bytes, str]:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(f"{self.url}/{key} is missing") from None
        return data, etag_of(data)

    def get_file(self, key: str, path: Path, *, crc: bool = True) -> tuple[int, int]:
        src = self._path(key)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                got = copy_file(src, fd, crc=crc, direct=False)  # (a restore's fetch)
            except FileNotFoundError:
                raise ObjectMissing(f"{self.url}/{key} is missing") from None
            fsync_fd(fd)
        finally:
            os.close(fd)
        return got

    def get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except FileNotFoundError:
            raise ObjectMissing(f"{self.url}/{key} is missing") from None
        try:
            return pread_exact(fd, max(0, end - start), start)
        finally:
            os.close(fd)

    def head(self, key: str) -> str | None:
        try:
            return etag_of(self._path(key).read_bytes())
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        base = self.root
        if not base.is_dir():
            return out
        for dirpath, _dirs, names in os.walk(base):
            for name in names:
                if name.startswith(".") and (name.endswith(".tmp") or name == ".lock"):
                    continue
                p = Path(dirpath) / name
                key = str(p.relative_to(base))
                if key.startswith(prefix):
                    with contextlib.suppress(FileNotFoundError):
                        out.append((key, p.stat().st_size))
        out.sort()
        return out

    def delete(self, keys: builtins.list[str]) -> None:
        dirs = set()
        for key in keys:
            p = self._path(key)
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                dirs.add(p.parent)
        for d in dirs:
            fsync_dir(d)


def _boto3() -> Any:
    try:
        import boto3  # noqa: PLC0415 (optional: only s3:// targets need it)
    except ImportError as exc:
        raise ImportError("s3:// targets need boto3: pip install 'tuffdb[s3]'") from exc
    return boto3


_TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
    "InternalError", "ServiceUnavailable", "503", "500", "502", "504",
})


class S3Store:
    """Objects in ``bucket`` under ``prefix`` through boto3."""

    def __init__(self, bucket: str, prefix: str) -> None:
        boto3 = _boto3()
        from botocore.config import Config  # noqa: PLC0415

        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.url = f"s3://{bucket}/{prefix}".rstrip("/")
        timeout = float(os.environ.get("TUFFDB_S3_TIMEOUT_S") or S3_TIMEOUT_S)
        # Short timeouts and few tries inside botocore: our callers retry with their
        # own backoff and must see a stalled endpoint as an error, not as a long wait.
        self._client = boto3.session.Session().client("s3", config=Config(
            retries={"mode": "standard", "max_attempts": 2},
            connect_timeout=min(5.0, timeout), read_timeout=timeout,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ))

    def deferred_sync(self) -> contextlib.AbstractContextManager[None]:
        """Nothing to defer: an object is durable when its PUT returns."""
        return contextlib.nullcontext()

    def _key(self, key: str) -> str:
        return self.prefix + key

    def _error(self, exc: Exception, key: str) -> Exception:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            code = str(err.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                return PreconditionFailed(f"{self.url}/{key}: conditional write lost ({code})")
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                return ObjectMissing(f"{self.url}/{key} is missing")
            if code in _TRANSIENT_CODES or status >= 500 or status == 429:
                return TransientError(f"{self.url}/{key}: {code or status}: {err.get('Message')}")
            return OperationalError(f"{self.url}/{key}: {code or status}: {err.get('Message')}")
        return TransientError(f"{self.url}/{key}: {type(exc).__name__}: {exc}")

    def _call(self, key: str, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            return fn(Bucket=self.bucket, **kwargs)
        except (ClientError, BotoCoreError, OSError) as exc:
            raise self._error(exc, key) from exc

    def put(self, key: str, data: bytes, *, if_none_match: bool = False,
            if_match: str | None = None) -> str:
        extra: dict[str, str] = {}
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if if_match is not None:
            extra["IfMatch"] = if_match
        r = self._call(key, self._client.put_object, Key=self._key(key), Body=data, **extra)
        return str(r["ETag"])

    def put_file(self, key: str, path: Path, *, size: int | None = None, link: bool = False,
                 if_none_match: bool = False, crc: bool = True,
                 throttle: Throttle | None = None) -> tuple[int, int]:
        del link, crc  # a bucket holds copies; the bytes are read anyway: always checksummed
        total = Path(path).stat().st_size if size is None else size
        if throttle is not None:
            throttle.take(total)
        if total <= MULTIPART_THRESHOLD:
            with Path(path).open("rb") as f:
                data = f.read(total)
            if len(data) != total:
                raise CorruptionError(f"{path} is shorter than {total} bytes", path=str(path))
            self.put(key, data, if_none_match=if_none_match)
            return crc32c(data), total
        c = self._client
        up = self._call(key, c.create_multipart_upload, Key=self._key(key))
        uid = up["UploadId"]
        state = [0, 0]
        try:
            parts = []
            for n, buf in enumerate(_chunks(Path(path), total, state, PART_SIZE), 1):
                r = self._call(key, c.upload_part, Key=self._key(key), UploadId=uid,
                               PartNumber=n, Body=buf)
                parts.append({"ETag": r["ETag"], "PartNumber": n})
            extra = {"IfNoneMatch": "*"} if if_none_match else {}
            self._call(key, c.complete_multipart_upload, Key=self._key(key), UploadId=uid,
                       MultipartUpload={"Parts": parts}, **extra)
        except BaseException:
            with contextlib.suppress(Exception):
                c.abort_multipart_upload(Bucket=self.bucket, Key=self._key(key), UploadId=uid)
            raise
        return state[0], state[1]

    def get(self, key: str) -> tuple[bytes, str]:
        r = self._call(key, self._client.get_object, Key=self._key(key))
        try:
            return r["Body"].read(), str(r["ETag"])
        except Exception as exc:  # a connection cut mid-body
            raise self._error(exc, key) from exc

    def get_file(self, key: str, path: Path, *, crc: bool = True) -> tuple[int, int]:
        del crc  # the bytes pass through here: always checksummed
        r = self._call(key, self._client.get_object, Key=self._key(key))
        crc_value = size = 0
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for buf in r["Body"].iter_chunks(_READ_CHUNK):
                    write_all(fd, buf)
                    crc_value = crc32c_extend(crc_value, buf)
                    size += len(buf)
                fsync_fd(fd)
            finally:
                os.close(fd)
        except OSError:
            raise
        except Exception as exc:
            raise self._error(exc, key) from exc
        return crc_value, size

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        from botocore.exceptions import ClientError  # noqa: PLC0415

        try:
            r = self._client.get_object(Bucket=self.bucket, Key=self._key(key),
                                        Range=f"bytes={start}-{end - 1}")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":
                return b""  # the range starts at or past the end (S3 answers 416)
            raise self._error(exc, key) from exc
        except Exception as exc:
            raise self._error(exc, key) from exc
        try:
            return bytes(r["Body"].read())
        except Exception as exc:  # a connection cut mid-body
            raise self._error(exc, key) from exc

    def head(self, key: str) -> str | None:
        try:
            r = self._call(key, self._client.head_object, Key=self._key(key))
        except ObjectMissing:
            return None
        return str(r["ETag"])

    def list(self, prefix: str) -> list[tuple[str, int]]:
        out = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Prefix": self._key(prefix)}
            if token:
                kwargs["ContinuationToken"] = token
            r = self._call(prefix, self._client.list_objects_v2, **kwargs)
            out += [(o["Key"][len(self.prefix):], int(o["Size"])) for o in r.get("Contents", [])]
            if not r.get("IsTruncated"):
                return sorted(out)
            token = r["NextContinuationToken"]

    def delete(self, keys: builtins.list[str]) -> None:
        for i in range(0, len(keys), 1000):
            batch = keys[i : i + 1000]
            self._call(batch[0], self._client.delete_objects,
                       Delete={"Objects": [{"Key": self._key(k)} for k in batch], "Quiet": True})
