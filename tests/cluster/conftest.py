"""Fixtures of the cluster tests: a private etcd per module, started by the test itself.

etcd is Debian's ``etcd-server`` (``dev.py test`` installs it); without it these tests
skip, saying so. Tests that kill or pause etcd start their own with :func:`etcd_factory`
so that the module's shared one stays healthy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tuffdb.testing.etcd import ETCD_MISSING, EtcdCluster, etcd_binary



@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """One single-member etcd shared by a module's tests (they use distinct keys)."""
    if etcd_binary() is None:
        pytest.skip(ETCD_MISSING)
    with EtcdCluster.start(tmp_path_factory.mktemp("etcd")) as cluster:
        yield cluster


@pytest.fixture
def etcd_factory(tmp_path: Path) -> Iterator[Callable[..., EtcdCluster]]:
    """``etcd_factory(size=1, **EtcdCluster.start options)``: private clusters, all stopped
    when the test ends."""
    if etcd_binary() is None:
        pytest.skip(ETCD_MISSING)
    started: list[EtcdCluster] = []

    def start(size: int = 1, **options: object) -> EtcdCluster:
        cluster = EtcdCluster.start(tmp_path / f"etcd{len(started)}", size=size,
                                    **options)  # type: ignore[arg-type]
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()
