"""Shared helpers for tuffdb benchmarks (PROTOCOL.md section 4, STYLE.md section 5).

Import from a benchmark script that lives in ``bench/`` (the script's directory is on
``sys.path`` when run as ``python bench/<name>.py``)::

    from _common import environment, fsync_probe, latency_summary, write_json

What is here:

- ``environment()``: the environment manifest (CPU, RAM, disk, filesystem, kernel, Python,
  package versions, git commit, load average).
- ``fsync_probe(dir)``: 50 x (4 KiB write + fsync) in ``dir``; min/avg/p95/p99/max in us.
- ``latency_summary(ns)``: count, percentiles and max of per-op latencies in ns; percentiles
  are suppressed (``None``) when N < 1000.
- ``spread(values)``: median with min and max across repetitions.
- ``median_index(values)``: the repetition whose value is the median (latency is reported from it).
- ``apparent_size(dir)``: sum of apparent file sizes under ``dir`` (``st_size``, not blocks).
- ``bench_dir(...)``: a fresh run directory on a real disk (refuses tmpfs), removed afterwards.
- ``write_json(path, obj)``: stable, human-diffable JSON.
"""

# Benchmark helpers, not library code: os.path is kept for speed in walks.
# ruff: noqa: INP001, CPY001, TC003, S603, S607, ICN001, PTH105, PTH108, PTH114, PTH118, PTH119, PTH123
from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MIN_N_FOR_PERCENTILES = 1000
PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1
# Filesystems a benchmark must never run on (their fsync does not reach media).
_MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "overlay-tmpfs"})


# --------------------------------------------------------------------------- generators
class SplitMix64:
    """splitmix64, as kvbench uses per client (seed XOR client_id * golden ratio)."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + SPLITMIX_GAMMA) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n


def client_seed(seed: int, client_id: int) -> int:
    """kvbench: ``seed XOR clientID * golden ratio`` (64-bit)."""
    return (seed ^ (client_id * SPLITMIX_GAMMA)) & MASK64


def rep_seed(seed: int, rep: int) -> int:
    """kvbench: repetition i uses ``seed + i * 1,000,003``."""
    return seed + rep * 1_000_003


# --------------------------------------------------------------------------- statistics
def percentile_sorted(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (q in 0..100)."""
    if len(sorted_values) == 0:
        raise ValueError("no values")
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


def latency_summary(latencies_ns: Iterable[int]) -> dict[str, Any]:
    """Count, p50/p90/p99/p99.9/p99.99, min and max in microseconds.

    Percentiles are ``None`` when N < 1000 (PROTOCOL.md section 4); ``min``/``max`` always shown.
    Uses NumPy when available (exact, nearest rank), else pure Python.
    """
    try:
        import numpy as np  # noqa: PLC0415

        arr = np.sort(np.fromiter(latencies_ns, dtype=np.int64))
        values: Sequence[float] = arr  # type: ignore[assignment]
        n = int(arr.size)
        mean = float(arr.mean()) if n else 0.0
    except ImportError:  # pragma: no cover - numpy is a runtime dependency
        values = sorted(latencies_ns)
        n = len(values)
        mean = sum(values) / n if n else 0.0
    out: dict[str, Any] = {"n": n, "unit": "us"}
    if n == 0:
        out.update({"min": None, "max": None, "mean": None, "percentiles": None})
        return out
    out["min"] = float(values[0]) / 1000.0
    out["max"] = float(values[-1]) / 1000.0
    out["mean"] = mean / 1000.0
    if n < MIN_N_FOR_PERCENTILES:
        out["percentiles"] = None
        out["percentiles_suppressed"] = f"N={n} < {MIN_N_FOR_PERCENTILES}"
    else:
        out["percentiles"] = {_pname(q): percentile_sorted(values, q) / 1000.0 for q in PERCENTILES}
    return out


def _pname(q: float) -> str:
    return "p" + (f"{q:g}")


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Median with min and max (PROTOCOL.md: >= 3 repetitions, median with min/max)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"median": None, "min": None, "max": None, "reps": 0}
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "reps": len(vals),
    }


def median_index(values: Sequence[float]) -> int:
    """Index of the repetition holding the median (lower median for an even count)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(order) - 1) // 2]


# --------------------------------------------------------------------------- disk helpers
def apparent_size(path: str | os.PathLike[str]) -> int:
    """Sum of apparent sizes (``st_size``) of all regular files under ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(os.path.join(root, name))
                if not os.path.islink(os.path.join(root, name)):
                    total += st.st_size
    return total


def file_listing(path: str | os.PathLike[str]) -> dict[str, int]:
    """Relative path -> apparent size, for the raw result (shows where the bytes are)."""
    out: dict[str, int] = {}
    base = Path(path)
    for root, _dirs, files in os.walk(base):
        for name in files:
            p = Path(root) / name
            with contextlib.suppress(FileNotFoundError):
                out[str(p.relative_to(base))] = p.lstat().st_size
    return out


def filesystem_of(path: str | os.PathLike[str]) -> dict[str, str]:
    """Mount point, device, filesystem type and options of the mount holding ``path``."""
    target = os.path.realpath(path)
    best: dict[str, str] = {}
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                dev, mnt, fstype, opts, *_ = line.split()
                mnt = mnt.replace("\\040", " ")
                if (target == mnt or target.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(
                    best.get("mount", "")
                ):
                    best = {"mount": mnt, "device": dev, "type": fstype, "options": opts}
    except OSError:
        pass
    return best


def check_real_disk(path: str | os.PathLike[str]) -> dict[str, str]:
    fs = filesystem_of(path)
    if fs.get("type") in _MEMORY_FILESYSTEMS:
        raise SystemExit(
            f"refusing to benchmark on {fs['type']} ({path}): fsync does not reach media; "
            "pass --dir on a real disk (ext4/xfs)"
        )
    return fs


@contextlib.contextmanager
def bench_dir(parent: str | os.PathLike[str], prefix: str) -> Iterator[Path]:
    """A fresh, empty directory under ``parent``; deleted afterwards (PROTOCOL.md section 4)."""
    Path(parent).mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix=prefix + "-", dir=parent))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fsync_probe(directory: str | os.PathLike[str], count: int = 50, size: int = 4096) -> dict:
    """``count`` x (``size`` B write + fsync) on one file in ``directory``; times in us.

    An average under ~50 us means the flush probably does not reach media: ``suspicious`` says so.
    """
    Path(directory).mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="fsync-probe-", dir=directory)
    buf = os.urandom(size)
    samples: list[float] = []
    try:
        for _ in range(count):
            t0 = time.perf_counter_ns()
            os.write(fd, buf)
            os.fsync(fd)
            samples.append((time.perf_counter_ns() - t0) / 1000.0)
    finally:
        os.close(fd)
        os.unlink(name)
    s = sorted(samples)
    avg = sum(s) / len(s)
    return {
        "count": count,
        "write_bytes": size,
        "call": "os.write + os.fsync",
        "at": utc_now(),
        "min_us": round(s[0], 1),
        "avg_us": round(avg, 1),
        "p95_us": round(percentile_sorted(s, 95), 1),
        "p99_us": round(percentile_sorted(s, 99), 1),
        "max_us": round(s[-1], 1),
        "suspicious": avg < 50.0,
        "filesystem": filesystem_of(directory),
    }


def thread_ticks(pid: int | str = "self") -> dict[str, tuple[int, int]]:
    """Each thread of process ``pid``: (user, system) CPU in clock ticks, from /proc."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().split(") ")[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[task.name] = (int(fields[11]), int(fields[12]))
    return out


# --------------------------------------------------------------------------- manifest
def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _mem_total_bytes() -> int | None:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def _disk_kind(device: str) -> str:
    """'ssd', 'hdd' or 'unknown' from /sys/block/<dev>/queue/rotational."""
    name = os.path.basename(device)
    for cand in (name, name.rstrip("0123456789"), name.split("p")[0] if "nvme" in name else name):
        rot = _read(f"/sys/block/{cand}/queue/rotational").strip()
        if rot:
            return (
                "rotational=1 (hdd, or a virtual disk that reports 1)"
                if rot == "1"
                else "rotational=0 (ssd/nvme, or virtual)"
            )
    return "unknown"


def git_commit(repo: Path = REPO) -> dict[str, Any]:
    def run(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    status = run("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": run("rev-parse", "HEAD"),
        "subject": run("log", "-1", "--format=%s"),
        "dirty": bool(status),
    }


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def tuffdb_build() -> str:
    """``"mypyc"`` when the compiled build of the hot modules is in use (it is then also
    what the servers this run starts use: they inherit TUFFDB_NATIVE_BUILD), else
    ``"python"``. Build it with ``tuffdb native build``; ``TUFFDB_NATIVE=0`` opts out."""
    import tuffdb  # noqa: PLC0415

    return "mypyc" if tuffdb._native.active is not None else "python"  # noqa: SLF001


def ensure_native_build() -> None:
    """Benchmark what ``tuffdb serve`` runs: if no compiled build is active (and
    ``TUFFDB_NATIVE`` is not ``0``), build it and re-run this command so ``import tuffdb``
    activates it. Without a C compiler the run goes on pure, and says so in its record."""
    import tuffdb  # noqa: PLC0415

    if tuffdb._native.active is not None or os.environ.get("TUFFDB_NATIVE") == "0":  # noqa: SLF001
        return
    try:
        tuffdb._native.build()  # noqa: SLF001
    except (RuntimeError, OSError) as exc:
        print(f"bench: no compiled build ({exc}); measuring pure Python", file=sys.stderr)
        return
    os.execv(sys.executable, [sys.executable, *sys.argv])


def environment(data_dir: str | os.PathLike[str], packages: Iterable[str] = ()) -> dict[str, Any]:
    """The environment manifest of a run set (PROTOCOL.md section 1.6 and section 4)."""
    fs = filesystem_of(data_dir)
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        affinity = []
    return {
        "recorded_at": utc_now(),
        "host": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": affinity,
        "ram_bytes": _mem_total_bytes(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "data_dir": str(Path(data_dir).resolve()),
        "filesystem": fs,
        "disk_kind": _disk_kind(fs.get("device", "")),
        "loadavg_at_start": _read("/proc/loadavg").strip(),
        "packages": package_versions(["tuffdb", "numpy", *packages]),
        "git": git_commit(),
        "tuffdb_build": tuffdb_build(),
        "command": shlex.join([os.path.basename(sys.executable), *sys.argv]),
        "mode": "embedded, shared GIL (one process; stores and load generator share it)",
    }


# --------------------------------------------------------------------------- output
def scrub(obj: Any, subs: Sequence[tuple[str, str]]) -> Any:
    """``obj`` with every string's ``old`` replaced by ``new``, in order (machine paths out)."""
    if isinstance(obj, str):
        for old, new in subs:
            obj = obj.replace(old, new)
        return obj
    if isinstance(obj, dict):
        return {k: scrub(v, subs) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v, subs) for v in obj]
    return obj


def write_json(path: str | os.PathLike[str], obj: Any,
               paths: Sequence[tuple[str | os.PathLike[str], str]] = ()) -> None:
    """Write a raw result with no machine paths: the repository becomes ``<repo>``, each
    of ``paths`` (path, placeholder) its placeholder, the home directory ``~``."""
    obj = scrub(obj, [(str(REPO), "<repo>"),
                      *((str(Path(d).resolve()), name) for d, name in paths),
                      (str(Path.home()), "~")])
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, p)


def fmt_rate(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:,.1f}"


def run_tool(script: str, argv: list[str], tools: dict[str, str]) -> bool:
    """Run ``python bench/<script> TOOL ...``: when ``argv`` starts with a name in ``tools``
    (tool name -> helper module in ``bench/``), call that module's ``main()`` with the rest
    of the arguments as its command line and return True; otherwise return False (the
    benchmark itself runs). Profilers, probes and plotters live beside the benchmark they
    serve this way, not as scripts of their own."""
    if not argv or argv[0] not in tools:
        return False
    sys.argv = [f"{script} {argv[0]}", *argv[1:]]
    result = importlib.import_module(tools[argv[0]]).main()
    if isinstance(result, int) and result:
        raise SystemExit(result)
    return True
