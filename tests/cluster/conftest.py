"""Fixtures of the cluster tests: a private etcd per module, started by the test itself.

etcd is Debian's ``etcd-server`` (``dev.py test`` installs it); without it these tests
skip, saying so. Tests that kill or pause etcd start their own with :func:`etcd_factory`
so that the module's shared one stays healthy.

When a test fails, the report shows the last lines every ``tuffdb serve`` node of the
test logged (``ServerNode.log_path``): a fault that shows once in a CI run can be read
from that run alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tuffdb.testing.etcd import ETCD_MISSING, EtcdCluster, etcd_binary

LOG_LINES_SHOWN = 400  # per node: the end of each log, where a failure's story is


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if not report.failed or not isinstance(tmp, Path):
        return
    for path in sorted(tmp.rglob("n*.log")):
        lines = [line for line in path.read_text(errors="replace").splitlines()
                 if '"event": "HTTP' not in line and '"event":"HTTP' not in line]
        report.sections.append((f"node log {path.relative_to(tmp)} (last {LOG_LINES_SHOWN})",
                                "\n".join(lines[-LOG_LINES_SHOWN:])))


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
