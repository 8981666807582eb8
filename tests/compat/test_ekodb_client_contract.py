"""Contract test: the real, published ekodb-client 0.31.0 against our server.

The wheel exists only for aarch64, so it runs under qemu-user-static with Debian's arm64
Python 3.11 (sysroot built once and cached, see ekodb_contract/qemu_sysroot.py). The
scenario (ekodb_contract/contract.py) covers auth, insert, find, query, update, actions,
delete, batch, KV, collections, schemas, distinct, transactions, savepoints and a 409;
it runs once in the client's default MessagePack mode and once in JSON mode.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "ekodb_contract"))
from ekodb_harness import EkoServer  # noqa: E402
from qemu_sysroot import ensure  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def arm64() -> tuple[Path, Path, Path]:
    return ensure()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EkoServer]:
    with EkoServer(tmp_path_factory.mktemp("ekodb-contract")) as s:
        yield s
        assert s.stop() == 0


@pytest.mark.parametrize("mode", ["msgpack", "json"])
def test_real_ekodb_client_runs_the_scenario(arm64: tuple[Path, Path, Path], server: EkoServer, mode: str) -> None:  # noqa: E501
    qemu, sysroot, site = arm64
    cmd = [str(qemu), "-L", str(sysroot), str(sysroot / "usr/bin/python3.11"),
           str(HERE / "ekodb_contract" / "contract.py"), server.base, server.admin_key, mode]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False,  # noqa: S603
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0 and "CONTRACT OK" in done.stdout, done.stdout + done.stderr
