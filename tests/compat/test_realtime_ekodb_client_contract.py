"""Contract test: the real ekodb-client 0.31.0 (aarch64 wheel under qemu-user-static, see
test_ekodb_client_contract.py) runs search, text_search, hybrid_search, WebSocket
requests and subscriptions, and SSE subscriptions against our server, in MessagePack and
JSON modes (scenario: ekodb_contract/contract_search_realtime.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "ekodb_contract"))
from ekodb_harness import EkoServer  # noqa: E402
from qemu_sysroot import ensure  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def arm64() -> tuple[Path, Path, Path]:
    return ensure()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EkoServer]:
    with EkoServer(tmp_path_factory.mktemp("ekodb-contract-rt"), durable_operations=True) as s:
        yield s
        assert s.stop() == 0


@pytest.mark.parametrize("mode", ["msgpack", "json"])
def test_real_ekodb_client_searches_and_subscribes(
    arm64: tuple[Path, Path, Path], server: EkoServer, mode: str
) -> None:
    qemu, sysroot, site = arm64
    script = HERE / "ekodb_contract" / "contract_search_realtime.py"
    cmd = [
        str(qemu),
        "-L",
        str(sysroot),
        str(sysroot / "usr/bin/python3.11"),
        str(script),
        server.base,
        server.admin_key,
        mode,
    ]
    done = subprocess.run(  # noqa: S603 - our own command line
        cmd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CONTRACT OK" in done.stdout, done.stdout + done.stderr
