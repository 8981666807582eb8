"""The private etcd the cluster tests stand on: installed by dev.py, started and faulted here.

If the harness lied (a paused member reported healthy, a stopped one left running, two
tests sharing a port), every cluster test above it would test something else than it
says; these tests pin what the harness promises.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tuffdb.testing.etcd import EtcdCluster, etcd_binary

ROOT = Path(__file__).resolve().parents[2]


def _dev_py() -> object:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_py_installs_the_etcd_the_harness_runs() -> None:
    dev = _dev_py()
    packages = dev.DEBIAN_TEST_PACKAGES  # type: ignore[attr-defined]
    assert packages["etcd-server"] == "etcd" and packages["etcd-client"] == "etcdctl"
    assert "etcd" in dev.DEBIAN_SERVICES  # type: ignore[attr-defined]
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("dev.py installs Debian packages only as root with apt")
    # dev.py test ran before this suite: as root with apt, etcd must be here.
    binary = etcd_binary()
    assert binary is not None
    version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             check=True).stdout
    assert "etcd Version: 3.4." in version


def test_members_have_their_own_ports_and_stop_leaves_nothing(
        etcd_factory: Callable[..., EtcdCluster]) -> None:
    first, second = etcd_factory(), etcd_factory()
    ports = {m.client_port for m in first.members + second.members} | {
        m.peer_port for m in first.members + second.members}
    assert len(ports) == 4
    assert first.members[0].healthy() and second.members[0].healthy()
    assert first.endpoint_list == first.members[0].url
    first.stop()
    first.stop()  # idempotent
    assert not first.members[0].running and not first.members[0].healthy()
    assert second.members[0].healthy()
    assert first.members[0].log_path.stat().st_size > 0  # etcd's log is kept for post-mortems


def test_a_paused_member_is_not_healthy_until_resumed(
        etcd_factory: Callable[..., EtcdCluster]) -> None:
    member = etcd_factory().members[0]
    member.pause()
    assert member.running and not member.healthy()
    member.resume()
    member.wait_ready()
    assert member.healthy()
    member.kill()
    assert not member.running
    with pytest.raises(RuntimeError, match="exited"):
        member.wait_ready(timeout=5)
