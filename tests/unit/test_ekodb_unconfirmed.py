"""A durable write the cluster did not confirm answers 504, which the ekoDB client does not
retry by itself (it retries 503): the write was applied and fsynced on the leader and may
survive, so an automatic retry of an insert would store the document twice."""

from __future__ import annotations

import json

from tuffdb.errors import NotEnoughReplicasError, NotLeaderError, PoisonedError
from tuffdb.server.ekodb.app import _not_durable


def test_an_unconfirmed_write_is_504_and_says_it_may_have_taken_effect() -> None:
    for exc in (NotEnoughReplicasError("1 of 1 followers did not confirm in time"),
                NotLeaderError("leadership lost", leader="10.0.0.2:9090")):
        resp = _not_durable(exc)
        assert resp.status == 504
        body = json.loads(resp.body)
        assert body["code"] == 504
        assert "may or may not have taken effect" in body["message"]


def test_other_failures_keep_their_status() -> None:
    # A read held for a write's round changed nothing: retrying it is safe.
    assert _not_durable(NotEnoughReplicasError("x"), "read of a write").status == 503
    assert _not_durable(PoisonedError("the log failed")).status == 503
    assert _not_durable(OSError(5, "Input/output error")).status == 500
