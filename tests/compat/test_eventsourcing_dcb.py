"""eventsourcing 9.5.x's own DCB conformance suite against the embedded store."""

from __future__ import annotations

import tempfile
from pathlib import Path

from eventsourcing.dcb.tests import DCBRecorderTestCase

from tuffdb.events import EventStore
from tuffdb.events.eventsourcing import TuffDBDCBRecorder


class TestTuffDBDCBRecorder(DCBRecorderTestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.store = EventStore.open(Path(self._tmp.name) / "ev")

    def tearDown(self) -> None:
        assert self.store.check() == []
        self.store.close()
        self._tmp.cleanup()

    def test_append_read(self) -> None:
        self._test_append_read(TuffDBDCBRecorder(self.store))

    def test_append_subscribe(self) -> None:
        self._test_append_subscribe(TuffDBDCBRecorder(self.store))

    def test_append_read_on_non_empty_store(self) -> None:
        rec = TuffDBDCBRecorder(self.store)
        self._test_append_read(rec)
        self._test_append_read(rec, initial_position=self.store.head() or 0)
