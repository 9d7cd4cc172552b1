"""Exceptions raised by tidemark.

Every one derives from :class:`TidemarkError`. Where pymongo has an exception
that means the same thing, the class has its name (``DuplicateKeyError``,
``DocumentTooLarge``, ``CollectionInvalid``, ``InvalidName``,
``ConfigurationError``, ``OperationFailure``, ``InvalidOperation``), so code
written against pymongo reads naturally; they are tidemark's own classes,
though, not pymongo's. Invalid documents also derive from
``bson.errors.InvalidDocument``, which is what pymongo's ``bson`` raises.
"""

from __future__ import annotations

import bson.errors


class TidemarkError(Exception):
    """Base class of every tidemark error."""


class OperationFailure(TidemarkError):
    """An operation the engine refused."""


class WriteError(OperationFailure):
    """A write the engine refused; nothing of it was applied."""


class DuplicateKeyError(WriteError):
    """Another document of the collection has this ``_id``."""


class ConflictError(WriteError):
    """A write transaction lost a write-write conflict (first committer
    wins); nothing of it was applied. Retry it from the start."""


class InvalidDocument(TidemarkError, bson.errors.InvalidDocument):
    """Not a valid BSON document (or one BSON cannot encode)."""


class DocumentTooLarge(InvalidDocument):
    """A document larger than the 16 MiB BSON limit."""


class CappedRecordTooLarge(DocumentTooLarge):
    """A document that does not fit in its capped collection's ring."""


class CappedOperationError(OperationFailure):
    """An operation capped collections do not allow: deleting one document,
    or a replacement that changes a document's size."""


class NotCappedError(OperationFailure):
    """The operation needs a capped collection."""


class CappedPositionLost(OperationFailure):
    """A cursor over a capped collection fell behind: the records it would
    read next were overwritten by newer inserts."""


class CollectionInvalid(OperationFailure):
    """``create_collection`` named a collection that exists."""


class CollectionNotFound(OperationFailure, LookupError):
    """No collection of this name exists."""


class TableNotFound(OperationFailure, LookupError):
    """No table of this name exists."""


class TableExists(OperationFailure):
    """A table of this name exists already."""


class TableDropped(OperationFailure):
    """The table was dropped since this handle or snapshot was made."""


class InvalidName(TidemarkError, ValueError):
    """A table or collection name that is empty, too long or reserved."""


class KeySizeError(TidemarkError, ValueError):
    """A key that is empty or longer than the database takes
    (``Database.max_key_size``: a quarter of a page, at most
    ``tidemark.MAX_KEY_SIZE``)."""


class ValueTooLarge(TidemarkError, ValueError):
    """A value longer than ``tidemark.MAX_VALUE_SIZE``."""


class ConfigurationError(TidemarkError, ValueError):
    """An option out of range, or a durability that is not none, write or
    fsync."""


class SnapshotTooOld(TidemarkError):
    """The snapshot was held while more changes piled up than the version
    budget holds; begin a new one."""


class InvalidOperation(TidemarkError):
    """An operation that cannot be done in this state."""


class DatabaseClosed(InvalidOperation):
    """The database was closed; its handles can no longer be used."""


class DatabaseLocked(TidemarkError):
    """The database directory is open in another handle or process."""


class TidemarkIOError(TidemarkError, OSError):
    """An operating-system I/O call failed."""


class DiskFullError(TidemarkIOError):
    """The file system is full. Nothing of the failed write was applied,
    and the database goes on accepting writes: retry once space is free.
    (Space is reserved ahead of each commit; only a write that still met a
    full disk half-way, which is rare, stops writes until reopen, and the
    next write then raises WritesStopped.)"""


class WritesStopped(TidemarkError):
    """A previous write to disk failed; the database refuses writes until it
    is reopened. Reads keep working."""


class CorruptionError(TidemarkError):
    """Bytes on disk failed a checksum or a structural check."""


class NotADatabaseError(CorruptionError):
    """The files are not a tidemark database (or are truncated)."""


class DatabaseFull(TidemarkError):
    """The database's page-id space is exhausted."""


__all__ = [name for name, v in list(globals().items()) if isinstance(v, type) and issubclass(v, TidemarkError)]
