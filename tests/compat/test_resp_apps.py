"""Real applications on tuffdb's RESP face, unchanged, and the same tests on real Redis.

Each test runs a real library's worker (or API) to completion against a server it starts
itself: once against tuffdb and once against Debian's redis-server, so a failure on
tuffdb that also happens on Redis is a harness bug, not a tuffdb one. Covered (the
commands each one uses are in redis-types.md §4): RQ (burst worker), Celery with kombu's
Redis broker and a solo worker, Huey (threaded consumer), Dramatiq (Lua-heavy broker),
``limits`` rate limiters, redis-py's Lock and register_script, Django's and aiocache's
Redis caches.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tuffdb.server.resp._process import ServerProcess, redis_server_path, start_redis, start_tuffdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apps_tasks  # noqa: E402

pytestmark = [
    pytest.mark.once,
    pytest.mark.skipif(redis_server_path() is None,
                       reason="redis-server is not installed (dev.py installs it)"),
]

WAIT_S = 60.0


@pytest.fixture(scope="module", params=["tuffdb", "redis"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ServerProcess]:
    if request.param == "tuffdb":
        proc = start_tuffdb(Path(tmp_path_factory.mktemp("apps")))
    else:
        proc = start_redis()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def url(server: ServerProcess) -> str:
    redis.Redis(port=server.port).flushall()
    return f"redis://127.0.0.1:{server.port}/0"


def test_rq_burst_worker_runs_every_job(url: str) -> None:
    from rq import Queue, SimpleWorker  # noqa: PLC0415  (optional app, imported per test)
    from rq.job import JobStatus  # noqa: PLC0415

    conn = redis.Redis.from_url(url)
    q = Queue("default", connection=conn)
    jobs = [q.enqueue(apps_tasks.add, i, i) for i in range(10)]
    failing = q.enqueue(apps_tasks.fail)
    upper = Queue("other", connection=conn).enqueue(apps_tasks.shout, "hi")
    worker = SimpleWorker([q, Queue("other", connection=conn)], connection=conn)
    assert worker.work(burst=True)
    assert [j.return_value() for j in jobs] == [2 * i for i in range(10)]
    assert upper.return_value() == "HI"
    failing.refresh()
    assert failing.get_status() == JobStatus.FAILED
    assert len(q) == 0
    assert q.failed_job_registry.count == 1
    assert q.finished_job_registry.count == 10


def test_rq_single_queue_worker_uses_blmove(url: str) -> None:
    """With one queue and a server saying >= 6.2.0, rq dequeues with BLMOVE."""
    from rq import Queue, SimpleWorker  # noqa: PLC0415

    conn = redis.Redis.from_url(url)
    q = Queue("solo", connection=conn)
    job = q.enqueue(apps_tasks.shout, "blmove")
    SimpleWorker([q], connection=conn).work(burst=True)
    assert job.return_value() == "BLMOVE"


def test_celery_solo_worker_with_the_redis_broker(url: str) -> None:
    from celery import Celery  # noqa: PLC0415
    from celery.contrib.testing.worker import start_worker  # noqa: PLC0415

    app = Celery(f"apps-{uuid.uuid4().hex[:8]}", broker=url, backend=url)
    app.conf.update(broker_connection_retry_on_startup=True, task_always_eager=False,
                    result_expires=600)

    @app.task(name="apps.mul")
    def mul(a: int, b: int) -> int:
        return a * b

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        results = [mul.delay(i, 3) for i in range(5)]
        assert [r.get(timeout=WAIT_S) for r in results] == [0, 3, 6, 9, 12]


def test_huey_consumer_runs_tasks_and_stores_results(server: ServerProcess, url: str) -> None:
    from huey import RedisHuey  # noqa: PLC0415

    huey = RedisHuey(f"apps-{uuid.uuid4().hex[:8]}", port=server.port, host="127.0.0.1")

    @huey.task()
    def square(x: int) -> int:
        return x * x

    consumer = huey.create_consumer(workers=2, periodic=False, check_worker_health=False)
    consumer.start()  # from the main thread: it starts its threads and returns
    try:
        results = [square(i) for i in range(6)]
        assert [r.get(blocking=True, timeout=WAIT_S) for r in results] == [0, 1, 4, 9, 16, 25]
        scheduled = square.schedule((7,), delay=0.1)
        assert scheduled.get(blocking=True, timeout=WAIT_S) == 49
    finally:
        consumer.stop(graceful=True)


def test_dramatiq_worker_drains_the_queue(server: ServerProcess) -> None:
    import dramatiq  # noqa: PLC0415
    from dramatiq.brokers.redis import RedisBroker  # noqa: PLC0415
    from dramatiq.worker import Worker  # noqa: PLC0415

    redis.Redis(port=server.port).flushall()
    broker = RedisBroker(host="127.0.0.1", port=server.port, namespace="apps-dq")
    dramatiq.set_broker(broker)
    seen: list[int] = []
    lock = threading.Lock()

    @dramatiq.actor(broker=broker, queue_name=f"q{uuid.uuid4().hex[:6]}", max_retries=0)
    def collect(n: int) -> None:
        with lock:
            seen.append(n)

    worker = Worker(broker, worker_threads=2, worker_timeout=100)
    worker.start()
    try:
        for i in range(20):
            collect.send(i)
        broker.join(collect.queue_name, timeout=int(WAIT_S * 1000))
        worker.join()
    finally:
        worker.stop()
        broker.close()
    assert sorted(seen) == list(range(20))


@pytest.mark.parametrize("strategy", ["moving", "fixed", "sliding"])
def test_limits_rate_limiters_allow_exactly_the_limit(url: str, strategy: str) -> None:
    from limits import parse  # noqa: PLC0415
    from limits.storage import RedisStorage  # noqa: PLC0415
    from limits.strategies import (  # noqa: PLC0415
        FixedWindowRateLimiter,
        MovingWindowRateLimiter,
        SlidingWindowCounterRateLimiter,
    )

    storage = RedisStorage(url)
    limiter = {"moving": MovingWindowRateLimiter, "fixed": FixedWindowRateLimiter,
               "sliding": SlidingWindowCounterRateLimiter}[strategy](storage)
    item = parse("5/minute")
    allowed = [limiter.hit(item, "user", "42") for _ in range(8)]
    assert allowed == [True] * 5 + [False] * 3
    assert limiter.test(item, "user", "43")
    stats = limiter.get_window_stats(item, "user", "42")
    assert stats.remaining == 0
    limiter.clear(item, "user", "42")
    assert limiter.hit(item, "user", "42")
    assert storage.check()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_lock_excludes_a_second_holder(url: str, protocol: int) -> None:
    r = redis.Redis.from_url(url, protocol=protocol)
    r.script_flush()
    lock = r.lock("resource", timeout=10)
    assert lock.acquire(blocking=False)
    other = r.lock("resource", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.extend(5)
    assert lock.locked() and lock.owned()
    lock.release()
    assert other.acquire(blocking_timeout=5)
    other.release()
    assert not r.exists("resource")


def test_django_redis_cache(url: str) -> None:
    import django  # noqa: PLC0415
    from django.conf import settings  # noqa: PLC0415

    if not settings.configured:
        settings.configure(CACHES={"default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}})
        django.setup()
    from django.core.cache import caches  # noqa: PLC0415

    settings.CACHES["default"]["LOCATION"] = url
    caches._settings = None  # noqa: SLF001  (the LOCATION changes between servers)
    cache = caches.create_connection("default")
    cache.set("greeting", {"hello": "world"}, timeout=60)
    assert cache.get("greeting") == {"hello": "world"}
    assert cache.add("greeting", "other") is False
    cache.set_many({"a": 1, "b": 2})
    assert cache.get_many(["a", "b", "c"]) == {"a": 1, "b": 2}
    assert cache.incr("a", 5) == 6
    assert cache.touch("a", 30)
    cache.delete("a")
    assert cache.get("a") is None
    cache.clear()
    assert cache.get("b") is None


def test_aiocache_redis_cache(server: ServerProcess) -> None:
    from aiocache import Cache  # noqa: PLC0415
    from aiocache.lock import OptimisticLock  # noqa: PLC0415

    async def run() -> None:
        cache = Cache(Cache.REDIS, endpoint="127.0.0.1", port=server.port, namespace="apps")
        await cache.clear()
        await cache.set("k", "v", ttl=60)
        assert await cache.get("k") == "v"
        await cache.multi_set([("a", 1), ("b", 2)], ttl=60)
        assert await cache.multi_get(["a", "b", "c"]) == [1, 2, None]
        assert await cache.increment("n", 3) == 3
        async with OptimisticLock(cache, "k") as lock:  # CAS: EVAL (GET + SET)
            await lock.cas("new")
        assert await cache.get("k") == "new"
        await cache.close()

    asyncio.run(run())


def test_an_app_worker_sees_no_commands_unknown_to_tuffdb(server: ServerProcess) -> None:
    """Redis's stats would show rejected commands; here: INFO still says 7.0.x so clients
    do not assume newer features."""
    info = redis.Redis(port=server.port).info("server")
    assert str(info["redis_version"]).startswith("7.0.")

