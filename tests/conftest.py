"""Shared fixtures: real temporary data directories and stores that are checked at teardown.

Every store a test opens through :func:`kv_store` is checked when the test ends: an
open store must report ``check() == []``; a store the test closed is reopened with
the same options and checked, so a ``close()`` that leaves a damaged directory
fails the test that did it [bbolt strict mode].

Under ``CI=true`` a skipped test or module is a failure that gives the skip's reason:
CI must not go green with a comparison left out (outside CI a skip stays a skip).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tuffdb.errors import ClosedError

CI = os.environ.get("CI", "").lower() in {"true", "1"}


def _fail_skip_under_ci(report: pytest.CollectReport | pytest.TestReport) -> None:
    if CI and report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which runs everything: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[
        None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _fail_skip_under_ci(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[
        None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _fail_skip_under_ci(report)
    return report


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh, empty directory path for one store (not created: the store creates it)."""
    return tmp_path / "data"


def _is_open(store: Any) -> bool:
    try:
        store.exists(b"probe")
    except ClosedError:
        return False
    return True


class KVStoreFactory:
    """``kv_store(path=None, **options)`` opens a ``tuffdb.KVStore`` and remembers it."""

    def __init__(self, default_path: Path) -> None:
        self.default_path = default_path
        self.opened: list[tuple[Path, dict[str, Any], Any]] = []
        self.unchecked: set[Path] = set()

    def __call__(self, path: Path | None = None, **options: Any) -> Any:
        from tuffdb import KVStore

        path = Path(path or self.default_path)
        store = KVStore.open(path, **options)
        self.opened.append((path, options, store))
        return store

    def skip_final_check(self, path: Path) -> None:
        """For tests that leave a directory damaged on purpose (they assert the damage)."""
        self.unchecked.add(Path(path))

    def final_check(self) -> list[str]:
        from tuffdb import KVStore

        problems: list[str] = []
        last: dict[Path, tuple[dict[str, Any], Any]] = {}
        for path, options, store in self.opened:
            last[path] = (options, store)
            if _is_open(store) and path not in self.unchecked:
                problems += [f"{path}: {p}" for p in store.check()]
            if _is_open(store):
                store.close()
        for path, (options, _store) in last.items():
            if path in self.unchecked:
                continue
            with KVStore.open(path, **options) as again:
                problems += [f"{path} (reopened): {p}" for p in again.check()]
        return problems


@pytest.fixture
def kv_store(data_dir: Path) -> Iterator[Callable[..., Any]]:
    """Open stores with ``kv_store(path=None, **KVStore.open options)``; all checked at teardown."""
    factory = KVStoreFactory(data_dir)
    yield factory
    problems = factory.final_check()
    assert problems == [], f"store.check() at teardown: {problems}"
