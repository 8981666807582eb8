"""Group commit: one committer thread, one write and one fsync per group of writers.

Writers put their records into a store-owned buffer under the store's lock and take a
*ticket* (:meth:`GroupCommitter.ticket`). The committer thread runs *rounds*: under the
store lock it calls ``drain()`` (which swaps out the buffered records) and numbers the
round; outside the lock it calls ``write(drained)``, which writes and fsyncs. When that
returns, every ticket up to the round number is durable and its waiters are released:
threads blocked in :meth:`wait` and futures from :meth:`future` (for asyncio servers).

Rounds start when a waiter asks (durable writes), on :meth:`kick`, and every
``interval_s / 2`` when an interval is set, which bounds the loss window in time: a
record written at ``t`` is on disk by ``t + interval_s`` even if nothing follows it.

IMPORTANT: a failed write or fsync poisons the store; waiters of that round and every
later one get PoisonedError, never a false acknowledgement.

Replication (a cluster leader, ``cluster/``) sets :attr:`GroupCommitter.confirm`: called
after a round's write and fsync with a callback, it returns at once and calls the
callback (in round order, on another thread) once enough followers hold everything
written so far; only then are the round's waiters released. The committer meanwhile
writes and fsyncs the next round, so the followers' round trip overlaps the leader's
next fsync instead of following it (rounds stay full: a blocking confirm made each
round wait for the previous one's followers first, measured in bench/replication.py).
When the callback gets an error, that round's waiters get it (``NotEnoughReplicasError``:
the write is durable here but not confirmed, so it is not acknowledged) and the store is
*not* poisoned: local data is intact and the next round may be confirmed again. While
``confirm`` is set no round is split (:meth:`begin_round` returns None).

A waiter that took its ticket after its writes (an event loop gathering a pass's writes
takes one ticket for all of them when the pass ends) passes ``since``, the ticket taken
before its first write: it is refused if any round from ``since`` to its ticket was. A
later round's success does not cover an earlier refusal once a leader stepped down: its
rounds then settle without followers (:meth:`stop_confirming`), so a waiter whose writes
were refused in round *n* and whose ticket is *n + 2* (a timer round between) was told
they were durable and confirmed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from tuffdb import metrics
from tuffdb.errors import ClosedError
from tuffdb.storage.poison import Poison


MAX_FAILED_ROUNDS = 4096  # unconfirmed rounds remembered for their late waiters


class GroupCommitter:
    def __init__(
        self,
        *,
        lock: threading.Lock | threading.RLock,
        drain: Callable[[], Any],
        write: Callable[[Any], int],
        poison: Poison,
        interval_s: float | None,
        name: str = "tuffdb-commit",
        stage: Callable[[Any], Any] | None = None,
    ) -> None:
        self._store_lock = lock
        self._drain = drain
        self._write = write
        self._stage = stage  # write without the fsync (begin_round); None: not offered
        self._settle: Callable[[], None] | None = None  # an open split round's
        self._poison = poison
        self._interval_s = interval_s
        mu = threading.Lock()
        # Two conditions over one lock: ``_cv`` tells waiters that a round finished or its
        # leader left; ``_work`` tells the committer thread that a round is wanted. A round
        # run by a leader (a server loop closing its pass) then wakes nobody who does not
        # care: notifying one shared condition woke the idle committer thread after every
        # such round, a context switch and a GIL hand-off each time on a one-core server.
        self._cv = threading.Condition(mu)
        self._work = threading.Condition(mu)
        self._started = 0  # rounds started (drained)
        self._durable = 0  # rounds completed and fsynced
        self._urgent = False
        self._leading = False  # a round is running (in the committer thread or a leader)
        self._closing = False
        self._futures: list[tuple[int, int, Future[None]]] = []  # (ticket, since, future)
        # round number -> why it was not confirmed (see the module docstring); kept for the
        # waiters that look after the round ended, the newest MAX_FAILED_ROUNDS of them.
        self._failed: dict[int, BaseException] = {}
        self._awaiting = 0  # rounds handed to ``confirm`` and not yet called back
        self._held: list[tuple[int, int]] = []  # rounds done locally while some await
        self._refuse_through = 0  # rounds up to this carry writes made under ``confirm``
        self._refusal: BaseException | None = None
        self.confirm: Callable[[Callable[[BaseException | None], None]], None] | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- writer side (call ticket() while holding the store lock) -----------------------
    def ticket(self) -> int:
        """The round that will carry every write made so far. Hold the store lock."""
        return self._started + 1

    @property
    def durable_ticket(self) -> int:
        return self._durable

    def wait(self, ticket: int, *, gather: bool = True) -> None:
        """Block until ``ticket`` is durable; PoisonedError if its round failed.

        Leader/follower: a waiter that finds no round in progress runs the next round
        itself (drain, write, fsync) instead of handing off to the committer thread; the
        others wait for it. Under the GIL every thread hand-off costs a scheduling delay,
        so this saves one per group. With ``gather`` a leader first yields the GIL once
        so writer threads released by the previous round can join; a caller that is
        the only writer (a server loop closing its pass) passes False, since yielding
        could hand the GIL to a background thread for a whole switch interval.
        """
        while True:
            with self._cv:
                # (With ``confirm`` a round may be written and await its followers: a
                # ticket whose round started waits for it rather than run another.)
                while self._durable < ticket and (self._leading or self._started >= ticket):
                    self._poison.check()
                    if self._closing and not self._thread.is_alive():
                        raise ClosedError("the store closed before this write was confirmed")
                    self._cv.wait()
                if self._durable >= ticket:
                    failed = self._failed.get(ticket)
                    if failed is not None:
                        raise failed
                    break
                self._poison.check()
                if self._closing and not self._thread.is_alive():
                    raise ClosedError("the store closed before this write was made durable")
                self._leading = True
            # Let writers released by the previous round append first (the GIL decides who
            # runs; sleep(0) hands it over), so this round carries a fuller group.
            if gather:
                time.sleep(0)
            try:
                self._round()
            finally:
                with self._cv:
                    self._leading = False
                    self._cv.notify_all()
        self._poison.check()

    # -- split rounds: the caller fsyncs (an event loop, asynchronously) ---------------------
    def begin_round(self, settle: Callable[[], None]) -> tuple[int, Any] | None:
        """Start a round whose fsync the caller does: drain and write (``stage``), and
        return ``(round, staged)``; :meth:`end_round` must follow, whatever happens. None
        when a round is already running (or none is offered): the caller waits as usual.
        While it is open no other round starts; threads waiting meanwhile keep waiting.
        ``settle()`` finishes the fsync and calls end_round synchronously: :meth:`close`
        calls it when the round is still open (close from the thread that began it).
        """
        if (self._stage is None or self.confirm is not None or self._awaiting
                or self._started < self._refuse_through):
            return None
        with self._cv:
            if self._leading or self._closing:
                return None
            self._poison.check()
            self._leading = True
            self._settle = settle
        try:
            with self._store_lock:
                self._started += 1
                number = self._started
                drained = self._drain()
            staged = self._stage(drained)
        except BaseException as exc:
            self._poison.set(exc)
            self._end(failed=True)
            raise
        return number, staged

    def end_round(self, number: int, records: int, error: BaseException | None) -> None:
        """Close a round :meth:`begin_round` opened: durable unless ``error`` (which
        poisons the store: nothing after it is acknowledged)."""
        if error is not None:
            self._poison.set(error)
        else:
            self._mark_durable(number, records)
        self._end(failed=error is not None)

    def _end(self, *, failed: bool) -> None:
        """A split round is over: let the next one start (the committer thread takes any
        futures that asked meanwhile); after a failure, fail what remains."""
        with self._cv:
            self._settle = None
            self._leading = False
            self._cv.notify_all()
            if self._futures:
                self._urgent = True
                self._work.notify()
        if failed:
            self._fail_remaining()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Run one round (every write so far becomes durable), then hold off the next one
        until the block ends: the logs stand at a round boundary inside it (the shipping
        seam's pause, storage/shipping.py). Waiters and the committer thread wait meanwhile.
        """
        with self._cv:
            while self._leading:
                self._cv.wait()
            self._leading = True
        try:
            self._round()
            yield
        finally:
            with self._cv:
                self._leading = False
                self._cv.notify_all()
                if self._futures:
                    self._urgent = True
                    self._work.notify()

    def future(self, ticket: int, since: int = 0) -> Future[None]:
        """Done once ``ticket`` is durable; failed when any round from ``since`` (the
        ticket taken before the caller's first write; 0: ``ticket`` alone) to ``ticket``
        was not confirmed (see the module docstring)."""
        fut: Future[None] = Future()
        with self._cv:
            if self._durable >= ticket:
                failed = self._failure(ticket, since)
                if failed is not None:
                    fut.set_exception(failed)
                else:
                    fut.set_result(None)
            elif self._poison:
                fut.set_exception(self._poison_error())
            else:
                self._futures.append((ticket, since, fut))
                self._urgent = True
                self._work.notify()
        return fut

    def _failure(self, ticket: int, since: int) -> BaseException | None:
        """Under the lock: why the newest round from ``since`` to ``ticket`` was refused,
        None when none was."""
        failed = self._failed
        if not failed:
            return None
        if since <= 0 or since >= ticket:
            return failed.get(ticket)
        if ticket - since < len(failed):
            numbers: Any = range(ticket, since - 1, -1)
        else:
            numbers = sorted((n for n in failed if since <= n <= ticket), reverse=True)
        for n in numbers:
            err = failed.get(n)
            if err is not None:
                return err
        return None

    def kick(self) -> None:
        with self._work:
            self._urgent = True
            self._work.notify()

    def set_interval(self, interval_s: float | None) -> None:
        with self._work:
            self._interval_s = interval_s
            self._work.notify()

    def close(self) -> None:
        """Run a final round, stop the thread."""
        settle = self._settle
        if settle is not None:
            settle()
        with self._cv:
            self._closing = True
            self._urgent = True
            self._work.notify()
            self._cv.notify_all()
        self._thread.join()
        with self._cv:  # waiters of a round still awaiting confirmation see the close
            self._cv.notify_all()

    # -- committer thread ------------------------------------------------------------------
    def _poison_error(self) -> BaseException:
        try:
            self._poison.check()
        except BaseException as exc:  # noqa: BLE001 - we want the exact error object
            return exc
        return RuntimeError("not poisoned")

    def _run(self) -> None:
        next_tick = time.monotonic()
        while True:
            with self._cv:
                while not self._urgent:
                    if self._interval_s is None:
                        self._work.wait()
                        continue
                    delay = next_tick - time.monotonic()
                    if delay <= 0:
                        break
                    self._work.wait(delay)
                self._urgent = False
                closing = self._closing
            if self._interval_s is not None:
                next_tick = time.monotonic() + self._interval_s / 2
            with self._cv:
                while self._leading:
                    self._cv.wait()
                self._leading = True
            try:
                self._round()
            finally:
                with self._cv:
                    self._leading = False
                    self._cv.notify_all()
            if closing:
                with self._cv:
                    done = not self._urgent or bool(self._poison)
                if done:
                    self._fail_remaining()
                    return

    def _round(self) -> None:
        if self._poison:
            self._fail_remaining()
            return
        with self._store_lock:
            self._started += 1
            number = self._started
            drained = self._drain()
        try:
            records = self._write(drained)
        except BaseException as exc:  # noqa: BLE001 - any failure poisons
            self._poison.set(exc)
            self._fail_remaining()
            return
        confirm = self.confirm
        if confirm is None:
            with self._cv:
                if self._awaiting:  # earlier rounds await followers: settle after them
                    self._held.append((number, records))
                    return
            self._settle_local(number, records)
            return
        with self._cv:
            self._awaiting += 1

        def confirmed(failed: BaseException | None) -> None:
            self._mark_durable(number, records, failed)
            with self._cv:
                self._awaiting -= 1
                held, self._held = (self._held, []) if not self._awaiting else ([], self._held)
            for n, r in held:
                self._settle_local(n, r)

        confirm(confirmed)

    def _settle_local(self, number: int, records: int) -> None:
        """A round that needs no confirmation: durable, unless it carries writes made while
        rounds needed one (:meth:`stop_confirming`), which are refused."""
        refused = self._refusal if number <= self._refuse_through else None
        self._mark_durable(number, records, refused)

    def stop_confirming(self, error: BaseException) -> None:
        """Rounds stop needing confirmation (a cluster leader stepped down). Every write
        made so far was made under it: the rounds that carry them and are not confirmed
        yet fail with ``error`` (their callbacks will say so; the rounds after them wait
        for that, so none is acknowledged out of order), and so does the round that
        carries what is buffered now. Writes after this call are durable once fsynced."""
        with self._store_lock:
            fence = self._started + 1
        with self._cv:
            if self.confirm is None:
                return
            self.confirm = None
            self._refuse_through = fence
            self._refusal = error

    def _mark_durable(self, number: int, records: int,
                      failed: BaseException | None = None) -> None:
        """Round ``number`` (of ``records``) is on disk: release its waiters, with
        ``failed`` as their error when the round was not confirmed."""
        if records:
            metrics.GROUP_SIZE.observe(records)
        with self._cv:
            self._durable = max(self._durable, number)
            if failed is not None:
                self._failed[number] = failed
                if len(self._failed) > MAX_FAILED_ROUNDS:
                    del self._failed[min(self._failed)]
            ready = [(f, self._failure(t, since)) for t, since, f in self._futures
                     if t <= number]
            if ready:
                self._futures = [entry for entry in self._futures if entry[0] > number]
            self._cv.notify_all()
        for f, err in ready:
            if err is None:
                f.set_result(None)
            else:
                f.set_exception(err)

    def _fail_remaining(self) -> None:
        with self._cv:
            futures, self._futures = self._futures, []
            failures = [self._failure(t, since) for t, since, _ in futures]
            self._cv.notify_all()
        for (t, _, f), err in zip(futures, failures, strict=True):
            if self._poison:
                f.set_exception(self._poison_error())
            elif t <= self._durable:
                if err is None:
                    f.set_result(None)
                else:
                    f.set_exception(err)
            else:
                f.set_exception(ClosedError("the store closed before this write was made durable"))
