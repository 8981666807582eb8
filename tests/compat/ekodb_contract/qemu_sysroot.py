"""Build (once, cached) an arm64 Python 3.11 sysroot + qemu-user-static + ekodb-client 0.31.0.

The recipe of ekodb-api.md section 16, without touching the machine's package setup:
apt runs with a private list/cache directory and ``APT::Architectures`` naming arm64 for
these calls only; packages are downloaded and extracted with ``dpkg-deb -x``, never
installed; the wheel is fetched with ``pip download`` and unzipped. The result lives in
``$TUFFDB_EKODB_QEMU_CACHE`` (default ``~/.cache/tuffdb/ekodb-client-0.31.0``) and is
reused by later runs. Needs network access to Debian's archive and PyPI the first time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "ekodb_client-0.31.0-cp38-abi3-manylinux_2_28_aarch64.whl"
ARM64_PACKAGES = (
    "libc6 libgcc-s1 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib python3.11 "
    "libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 liblzma5 libsqlite3-0 libuuid1 libncursesw6 "
    "libtinfo6 libreadline8 libcrypt1 libdb5.3 libgdbm6 libnsl2 libtirpc3 libgssapi-krb5-2 "
    "libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0 libkeyutils1"
).split()  # libmpdec3 is not in bookworm; the arm64 python carries its own decimal


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "tuffdb" / "ekodb-client-0.31.0"
    return Path(os.environ.get("TUFFDB_EKODB_QEMU_CACHE", default))


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed ({done.returncode}):\n{done.stderr[-2000:]}")


def ensure() -> tuple[Path, Path, Path]:
    """``(qemu, sysroot, site)``, building them on first use."""
    root = cache_dir()
    sysroot, site = root / "sysroot", root / "site"
    qemu = sysroot / "usr" / "bin" / "qemu-aarch64-static"
    if (root / "READY").exists():
        return qemu, sysroot, site
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ekodb-qemu-", dir=root.parent))
    apt = ["apt-get", "-q", "-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64",
           "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::Cache={work / 'cache'}",
           "-o", "Debug::NoLocking=1"]  # fmt: skip
    for d in ("lists/partial", "cache/archives/partial", "debs", "sysroot", "site"):
        (work / d).mkdir(parents=True)
    _run([*apt, "update"])
    _run([*apt, "download", "qemu-user-static", *(f"{p}:arm64" for p in ARM64_PACKAGES)], cwd=work / "debs")
    for deb in sorted((work / "debs").glob("*.deb")):
        _run(["dpkg-deb", "-x", str(deb), str(work / "sysroot")])
    _run([sys.executable, "-m", "pip", "download", "ekodb-client==0.31.0", "--only-binary=:all:",
          "--platform", "manylinux_2_28_aarch64", "--no-deps", "-d", str(work)])  # fmt: skip
    with zipfile.ZipFile(work / WHEEL) as wheel:
        wheel.extractall(work / "site")
    for d in ("lists", "cache", "debs"):
        shutil.rmtree(work / d)
    (work / WHEEL).unlink()
    (work / "READY").write_text("ok\n")
    if root.exists():
        shutil.rmtree(root)
    work.rename(root)
    return qemu, sysroot, site
