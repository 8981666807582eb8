"""The whole tuffdb exception tree.

Every error tuffdb raises on purpose derives from :class:`Error`. Engine internals
never become public types: they go in :attr:`CorruptionError.reason`. Each server
maps this tree to its protocol in one table (see ``tuffdb.server``).
"""

from __future__ import annotations


class Error(Exception):
    """Base of everything tuffdb raises on purpose."""


class ProgrammingError(Error):
    """The API was misused (wrong argument type, call order, state)."""


class ClosedError(ProgrammingError):
    """A handle was used after ``close()``; open the store again."""


class ReadOnlyError(ProgrammingError):
    """A write was attempted on a read-only handle."""


class NotFoundError(Error, KeyError):
    """The key, record or event does not exist (also a ``KeyError``)."""


class IntegrityError(Error):
    """A DCB append condition failed; ``.condition`` holds the condition."""

    def __init__(self, message: str, condition: object | None = None) -> None:
        super().__init__(message)
        self.condition = condition


class OperationalError(Error):
    """The operation could not be carried out in the store's current situation."""


class LockTimeout(OperationalError, TimeoutError):
    """Another process holds the data directory's lock."""


class StorageFullError(OperationalError):
    """The disk or a configured size limit is full."""


class LimitExceeded(OperationalError, ValueError):
    """A key, value, batch or message is larger than its limit (checked before any write)."""


class ConflictError(OperationalError):
    """A transaction lost a commit-time conflict; retry it."""


class NotEnoughReplicasError(OperationalError):
    """A durable write was fsynced here but not confirmed by the required number of
    followers in time, so it is not acknowledged: it may or may not survive a failover.
    Retry once followers are back in sync (``tuffdb cluster status``)."""


class NotLeaderError(ReadOnlyError):
    """This cluster node is not the leader (a follower, or a leader whose lease lapsed);
    ``.leader`` names the current leader's address when one is known."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class CoordinationError(OperationalError):
    """The coordination store (etcd) refused a request; ``code`` is its gRPC status code.

    ``compact_revision`` is set when a read or watch asked for history etcd has compacted
    away (code 11): read the current state and watch again from there.
    """

    def __init__(self, message: str, *, code: int | None = None,
                 compact_revision: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.compact_revision = compact_revision


class CoordinationUnavailable(CoordinationError):
    """No etcd endpoint answered in time (down, paused, cut off or without a leader).

    ``maybe_applied`` is True when a write was sent and its answer lost: it may or may not
    have taken effect, so read before acting on either assumption.
    """

    def __init__(self, message: str, *, maybe_applied: bool = False,
                 code: int | None = None) -> None:
        super().__init__(message, code=code)
        self.maybe_applied = maybe_applied


class LeaseExpired(CoordinationError):
    """The etcd lease is gone (its TTL ran out or it was revoked): keys under it are deleted."""


class CorruptionError(Error):
    """Bytes on disk or on the wire failed validation.

    ``path`` and ``offset`` say where, ``reason`` says what, ``bytes_dropped`` how much
    a recovery discarded (0 when nothing was discarded).
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        bytes_dropped: int = 0,
    ) -> None:
        where = f" in {path}" if path else ""
        at = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"corruption{where}{at}: {reason}")
        self.reason = reason
        self.path = path
        self.offset = offset
        self.bytes_dropped = bytes_dropped


class VersionMismatchError(Error):
    """A file was written by an unknown (usually newer) format version."""


class PoisonedError(Error):
    """An earlier write or fsync failed; the store refuses writes. Close and reopen it."""


class AuthError(Error):
    """Authentication failed (missing or wrong credentials, expired token)."""


class WrongKeyError(AuthError):
    """The encryption key does not match the one the data was written with."""


class PermissionDeniedError(AuthError):
    """The authenticated principal may not do this."""


class ProtocolError(Error):
    """Malformed wire input."""


class UnknownFileWarning(UserWarning):
    """``check()`` found a file in the data directory that tuffdb did not write."""


class RecoveredTailWarning(UserWarning):
    """Recovery truncated a torn or corrupt tail; ``bytes_dropped`` in the message."""


__all__ = [
    "AuthError",
    "ClosedError",
    "ConflictError",
    "CoordinationError",
    "CoordinationUnavailable",
    "CorruptionError",
    "Error",
    "IntegrityError",
    "LeaseExpired",
    "LimitExceeded",
    "LockTimeout",
    "NotFoundError",
    "OperationalError",
    "PermissionDeniedError",
    "PoisonedError",
    "ProgrammingError",
    "ProtocolError",
    "ReadOnlyError",
    "RecoveredTailWarning",
    "StorageFullError",
    "UnknownFileWarning",
    "VersionMismatchError",
    "WrongKeyError",
]
