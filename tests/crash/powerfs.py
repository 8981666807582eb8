"""powerfs: a FUSE file system that loses what a power cut loses (a small LazyFS).

A server killed with SIGKILL loses nothing it wrote: the kernel's page cache keeps its
unsynced writes and a restart reads them back. So a crash test that only kills the process
passes with every fsync deleted. A power cut is different: whatever was written but not
made durable by a completed ``fsync``/``fdatasync`` is gone. This tool models that (the
idea is LazyFS's, the FUSE file system Jepsen uses; the code is ours).

Run it as its own process over a backing directory::

    python tests/crash/powerfs.py BACKING MOUNTPOINT

and the mount point behaves like BACKING, with these rules:

What it models (file data and size):
- A ``write`` or ``truncate`` goes to an in-memory overlay of 4 KiB pages kept per backing
  inode, together with the file's size as writers see it. Reads merge the overlay over the
  backing file; ``stat`` reports the overlay's size. The backing file is not touched.
- ``fsync`` or ``fdatasync`` of a file (the kernel sends the same request for both, and for
  a Linux AIO ``IOCB_CMD_FSYNC``/``IOCB_CMD_FDSYNC``, which it runs as ``vfs_fsync`` on a
  worker) writes that inode's overlay into the backing file, sets its size, fsyncs it for
  real, and only then answers. ``fdatasync`` is treated as ``fsync`` (POSIX has it flush
  what is needed to read the data back, the size included).
- ``crash`` (on the control channel) drops every overlay at once and unmounts: the backing
  directory is then exactly what a power cut leaves, and a server restarts on it directly.

What it does not model:
- Namespace operations (create, rename, unlink, mkdir, rmdir, link, chmod, utimens) are
  passed through to the backing directory and so are durable at once, as if every one
  were followed by an fsync of its directory (``fsyncdir`` is answered without effect).
  A missing directory fsync is therefore not caught here.
- Torn writes within a page and reordering of writes: an overlay page is either all lost
  or all written, and an fsync writes its inode's pages in one go.
- Other processes' files on the machine: only what goes through the mount is covered.

Control channel: one command per line on stdin, one answer per line on stdout.

- ``crash``: drop every unsynced page, refuse every later request with EIO, unmount,
  answer ``crashed pages=N`` (N: pages dropped) and exit.
- ``fsync-error on`` / ``fsync-error off``: from now on every fsync (and fsyncdir) fails
  with EIO and makes nothing durable (as Linux after a write-back error: the pages stay
  readable until the crash, then they are gone); ``off`` ends that. Answer ``ok``.
- ``stats``: answer ``stats fsyncs=N failed=M dirty_pages=P``.
- end of input: as ``crash``, so a test that dies leaves no mount behind.

The first line on stdout is ``ready`` once the mount serves requests.
"""

from __future__ import annotations

import ctypes.util
import errno
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

PAGE_SIZE = 4096


class Overlay:
    """The unsynced state of one backing inode: pages written since its last fsync, its
    size as writers see it, and ``keep``: below it the backing file's bytes still hold
    (a truncate lowers it; bytes of the backing file at or past it read as zeros)."""

    __slots__ = ("keep", "lock", "pages", "size")

    def __init__(self, size: int) -> None:
        self.pages: dict[int, bytearray] = {}
        self.size = size
        self.keep = size
        self.lock = threading.Lock()

    def backing_page(self, fd: int, index: int) -> bytearray:
        start = index * PAGE_SIZE
        want = min(PAGE_SIZE, self.keep - start)
        page = bytearray(os.pread(fd, want, start)) if want > 0 else bytearray()
        page.extend(bytes(PAGE_SIZE - len(page)))
        return page

    def read(self, fd: int, size: int, offset: int) -> bytes:
        end = min(offset + size, self.size)
        if offset >= end:
            return b""
        out = bytearray(os.pread(fd, min(end, self.keep) - offset, offset)
                        if self.keep > offset else b"")
        out.extend(bytes(end - offset - len(out)))
        pages = self.pages
        if pages:
            for index in range(offset // PAGE_SIZE, (end - 1) // PAGE_SIZE + 1):
                page = pages.get(index)
                if page is None:
                    continue
                lo = max(offset, index * PAGE_SIZE)
                hi = min(end, (index + 1) * PAGE_SIZE)
                out[lo - offset : hi - offset] = page[lo - index * PAGE_SIZE : hi - index * PAGE_SIZE]
        return bytes(out)

    def write(self, fd: int, data: bytes, offset: int) -> None:
        pages = self.pages
        pos, end = offset, offset + len(data)
        view = memoryview(data)
        while pos < end:
            index, lo = divmod(pos, PAGE_SIZE)
            n = min(PAGE_SIZE - lo, end - pos)
            chunk = view[pos - offset : pos - offset + n]
            page = pages.get(index)
            if page is not None:
                page[lo : lo + n] = chunk
            elif n == PAGE_SIZE:
                pages[index] = bytearray(chunk)
            else:
                page = pages[index] = self.backing_page(fd, index)
                page[lo : lo + n] = chunk
            pos += n
        self.size = max(self.size, end)

    def truncate(self, length: int) -> None:
        if length < self.size:
            last = length // PAGE_SIZE
            for index in [i for i in self.pages if i > last or (i == last and length % PAGE_SIZE == 0)]:
                del self.pages[index]
            page = self.pages.get(last)
            if page is not None:
                cut = length - last * PAGE_SIZE
                page[cut:] = bytes(PAGE_SIZE - cut)
            self.keep = min(self.keep, length)
        self.size = length

    def flush(self, fd: int) -> None:
        """Make the overlay durable in the backing file: zeros past ``keep``, the pages,
        the size, then a real fsync."""
        if self.keep < os.fstat(fd).st_size:
            os.ftruncate(fd, self.keep)
        run: list[bytearray] = []
        run_start = -1
        for index in sorted(self.pages):
            if run and index != run_start + len(run):
                os.pwritev(fd, run, run_start * PAGE_SIZE)
                run = []
            if not run:
                run_start = index
            run.append(self.pages[index])
        if run:
            os.pwritev(fd, run, run_start * PAGE_SIZE)
        os.ftruncate(fd, self.size)
        os.fsync(fd)
        self.pages.clear()
        self.keep = self.size


def _fail(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class PowerFS:
    """The operations (a passthrough to ``root`` with overlays); see the module docstring."""

    use_ns = True

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self._overlays: dict[int, Overlay] = {}  # backing st_ino -> its overlay
        self._handles: dict[int, int] = {}  # fh (the backing fd) -> backing st_ino
        self._lock = threading.Lock()
        self.dead = False
        self.fsync_error = False
        self.fsyncs = 0
        self.failed_fsyncs = 0

    # -- helpers ------------------------------------------------------------------------
    def _path(self, path: str) -> str:
        return self.root + path

    def _overlay(self, ino: int, fd: int) -> Overlay:
        with self._lock:
            if self.dead:
                raise _fail(errno.EIO)
            ov = self._overlays.get(ino)
            if ov is None:
                ov = self._overlays[ino] = Overlay(os.fstat(fd).st_size)
            return ov

    def _live(self) -> None:
        """Called under an overlay's lock: refuse once crashed (the caller may hold an
        overlay it took before the crash cleared them)."""
        if self.dead:
            raise _fail(errno.EIO)

    def _fd(self, fh: int | None) -> int:
        if fh is None or fh not in self._handles:
            raise _fail(errno.EBADF)
        return fh

    # -- control ------------------------------------------------------------------------
    def crash(self) -> int:
        with self._lock:
            self.dead = True
            dropped = 0
            for ov in self._overlays.values():
                with ov.lock:
                    dropped += len(ov.pages)
                    ov.pages.clear()
            self._overlays.clear()
        return dropped

    def dirty_pages(self) -> int:
        with self._lock:
            return sum(len(ov.pages) for ov in self._overlays.values())

    # -- files --------------------------------------------------------------------------
    def _handle(self, fd: int) -> int:
        self._handles[fd] = os.fstat(fd).st_ino
        return fd

    def create(self, path: str, mode: int, flags: int) -> int:
        if self.dead:
            raise _fail(errno.EIO)
        try:
            fd = os.open(self._path(path), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                         mode & 0o7777)
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
            return self.open(path, flags)
        with self._lock:  # a new file: drop what an earlier owner of the inode number left
            self._overlays.pop(os.fstat(fd).st_ino, None)
        return self._handle(fd)

    def open(self, path: str, flags: int) -> int:
        if self.dead:
            raise _fail(errno.EIO)
        fd = self._handle(os.open(self._path(path), os.O_RDWR | os.O_CLOEXEC))
        if flags & os.O_TRUNC:
            self.truncate(path, 0, fd)
        return fd

    def release(self, path: str | None, fh: int) -> int:
        self._handles.pop(fh, None)
        os.close(fh)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close(2) makes nothing durable

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        fd = self._fd(fh)
        ov = self._overlay(self._handles[fd], fd)
        with ov.lock:
            self._live()
            return ov.read(fd, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        fd = self._fd(fh)
        ov = self._overlay(self._handles[fd], fd)
        with ov.lock:
            self._live()
            ov.write(fd, data, offset)
        return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        if fh is not None:
            fd, close = self._fd(fh), False
        else:
            fd, close = os.open(self._path(path or ""), os.O_RDWR), True
        try:
            ov = self._overlay(os.fstat(fd).st_ino, fd)
            with ov.lock:
                self._live()
                ov.truncate(length)
        finally:
            if close:
                os.close(fd)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        fd = self._fd(fh)
        ov = self._overlay(self._handles[fd], fd)
        with ov.lock:
            self._live()
            if self.fsync_error:
                self.failed_fsyncs += 1
                raise _fail(errno.EIO)
            ov.flush(fd)
            self.fsyncs += 1
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        if self.dead or self.fsync_error:
            raise _fail(errno.EIO)
        return 0  # namespace operations are durable at once (module docstring)

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        if fh is not None and fh in self._handles:
            st = os.fstat(fh)
        elif path is not None:
            st = os.lstat(self._path(path))
        else:
            raise _fail(errno.ENOENT)
        attrs = {k: getattr(st, k) for k in ("st_mode", "st_ino", "st_nlink", "st_uid",
                                              "st_gid", "st_size", "st_blocks")}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        with self._lock:
            ov = self._overlays.get(st.st_ino)
        if ov is not None:
            attrs["st_size"] = ov.size
            attrs["st_blocks"] = (ov.size + 511) // 512
        return attrs

    # -- namespace: passed through (durable at once) ---------------------------------------
    def _pass(self, fn: Any, *args: Any) -> int:
        if self.dead:
            raise _fail(errno.EIO)
        fn(*args)
        return 0

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        # with use_ino, an entry needs its inode number (readdir(3) hides number 0)
        here = os.lstat(self._path(path))
        out = [(name, {"st_ino": here.st_ino, "st_mode": here.st_mode}, 0) for name in (".", "..")]
        with os.scandir(self._path(path)) as entries:
            out += [(e.name, {"st_ino": e.inode(), "st_mode": e.stat(follow_symlinks=False).st_mode},
                     0) for e in entries]
        return out

    def mkdir(self, path: str, mode: int) -> int:
        return self._pass(os.mkdir, self._path(path), mode)

    def rmdir(self, path: str) -> int:
        return self._pass(os.rmdir, self._path(path))

    def unlink(self, path: str) -> int:
        return self._pass(os.unlink, self._path(path))

    def rename(self, old: str, new: str) -> int:
        return self._pass(os.rename, self._path(old), self._path(new))

    def link(self, target: str, source: str) -> int:
        return self._pass(os.link, self._path(source), self._path(target))

    def symlink(self, target: str, source: str) -> int:
        return self._pass(os.symlink, source, self._path(target))

    def readlink(self, path: str) -> str:
        return os.readlink(self._path(path))

    def chmod(self, path: str | None, mode: int) -> int:
        return self._pass(os.chmod, self._path(path or ""), mode)

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        return self._pass(os.chown, self._path(path or ""), uid, gid)

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        if times is None:
            return self._pass(os.utime, self._path(path or ""))
        return self._pass(os.utime, self._path(path or ""), None, times)

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._path(path), amode):
            raise _fail(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._path(path))
        return {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree",
                                            "f_bavail", "f_files", "f_ffree", "f_favail",
                                            "f_flag", "f_namemax")}


def _control(fs: PowerFS, mountpoint: str) -> None:
    """Read commands from stdin (module docstring); unmount on ``crash`` or end of input."""
    for line in sys.stdin:
        cmd = line.split()
        if cmd == ["crash"]:
            break
        if cmd[:1] == ["fsync-error"] and cmd[1:] in (["on"], ["off"]):
            fs.fsync_error = cmd[1] == "on"
            print("ok", flush=True)
        elif cmd == ["stats"]:
            print(f"stats fsyncs={fs.fsyncs} failed={fs.failed_fsyncs} "
                  f"dirty_pages={fs.dirty_pages()}", flush=True)
        else:
            print(f"error unknown command {line.strip()!r}", flush=True)
    print(f"crashed pages={fs.crash()}", flush=True)
    subprocess.run(["fusermount3", "-u", "-z", mountpoint], check=False)
    # Exit now, not when the FUSE loop returns: a lazy unmount waits for the last open
    # file, and a process still holding one (a test that failed) gets ENOTCONN instead.
    os._exit(0)


def unavailable() -> str | None:
    """Why a mount cannot work on this machine (tests skip with it; CI=true fails), or None."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse (the kernel's FUSE device)"
    if shutil.which("fusermount3") is None or ctypes.util.find_library("fuse3") is None:
        return "no libfuse3 and fusermount3 (Debian package fuse3; dev.py test installs it)"
    return None


class Mount:
    """powerfs in a child process (the test's side of the control channel).

    ``Mount(backing, mountpoint)`` returns once the mount serves requests; use it as a
    context manager so that the mount is gone when the test ends, whatever happened.
    """

    def __init__(self, backing: Path, mountpoint: Path) -> None:
        backing.mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
        self.backing, self.mountpoint = backing, mountpoint
        self.proc = subprocess.Popen(  # noqa: S603 (this file, run by this interpreter)
            [sys.executable, __file__, str(backing), str(mountpoint)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = self._answer()
        if first != "ready":
            self.proc.kill()
            raise RuntimeError(f"powerfs did not mount {mountpoint}: {first!r} "
                               f"(exit {self.proc.wait()})")

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def command(self, text: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def fsync_error(self, on: bool) -> None:  # noqa: FBT001
        assert self.command(f"fsync-error {'on' if on else 'off'}") == "ok"

    def stats(self) -> dict[str, int]:
        words = self.command("stats").split()
        assert words[0] == "stats", words
        return {k: int(v) for k, v in (w.split("=") for w in words[1:])}

    def crash(self) -> int:
        """Cut the power: every unsynced page is lost, the mount goes; returns how many
        pages were dropped. Kill the processes writing through the mount first."""
        answer = self.command("crash")
        assert self.proc.wait(60) == 0, answer
        assert answer.startswith("crashed pages="), answer
        return int(answer.split("=")[1])

    def __enter__(self) -> Mount:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # end of input: crash and unmount
            self.proc.wait(60)


def main() -> int:
    import mfusepy as fuse  # noqa: PLC0415 (only the mounting process needs libfuse)

    class Ops(PowerFS, fuse.Operations):
        def init(self, path: str) -> None:
            print("ready", flush=True)

    class Fuse(fuse.FUSE):
        # mfusepy passes no file handle to truncate; an ftruncate(2) of an unlinked file
        # (hard_remove) has only its handle, so hand it over.
        def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
            fh = fip.contents.fh if fip else None
            name = None if path is None else path.decode()
            return self.operations.truncate(name, length, fh)

    backing, mountpoint = sys.argv[1:3]
    fs = Ops(Path(backing).resolve())
    threading.Thread(target=_control, args=(fs, mountpoint), daemon=True).start()
    Fuse(fs, mountpoint, foreground=True, nothreads=False, hard_remove=True, use_ino=True,
         fsname="powerfs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
