"""tidemark: an embedded, transactional document and key-value store.

A pymongo-shaped API over the tidemark engine (Rust). Documents are dicts,
encoded with the ``bson`` package that ships with pymongo, so ObjectId,
Int64, Decimal128 and datetime values move between tidemark and MongoDB
unchanged. Every call into the engine releases the GIL.

>>> import tidemark
>>> db = tidemark.open("data/app", cache_size="64MB", durability="write")
>>> oplog = db.create_collection("oplog", capped={"size": 100 * 2**20})
>>> oplog.insert_one({"op": "i", "o": {"a": 1}}).inserted_id   # doctest: +SKIP
ObjectId('...')
>>> db.close()
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, List, Optional, Sequence, Tuple, Union

import bson
import bson.errors
from bson import ObjectId
from bson.codec_options import DEFAULT_CODEC_OPTIONS, CodecOptions
from bson.raw_bson import RawBSONDocument

from . import _tidemark, errors
from .errors import *  # noqa: F401,F403  (the exception classes are part of the API)
from .errors import (
    CollectionNotFound,
    InvalidDocument,
    InvalidOperation,
    NotCappedError,
    OperationFailure,
    TidemarkError,
    WriteError,
)

__version__: str = _tidemark.VERSION

#: Longest key of a table, in bytes, at the default page size (the most any
#: database takes; ``Database.max_key_size`` is one database's limit).
MAX_KEY_SIZE: int = _tidemark.MAX_KEY_SIZE
#: Page size of a new database unless ``page_size`` chooses another.
DEFAULT_PAGE_SIZE: int = _tidemark.DEFAULT_PAGE_SIZE
#: Longest value of a table, in bytes.
MAX_VALUE_SIZE: int = _tidemark.MAX_VALUE_SIZE
#: Largest document, in bytes of BSON (as in MongoDB).
MAX_DOCUMENT_SIZE: int = _tidemark.MAX_DOCUMENT_SIZE

ASCENDING = 1
DESCENDING = -1

Table = _tidemark.Table

_Durability = Optional[str]


class CursorType(enum.IntEnum):
    """Cursor kinds, with pymongo's values."""

    #: An ordinary cursor: it ends when the results do.
    NON_TAILABLE = 0
    #: On a capped collection: at the end, iteration stops, but the cursor
    #: stays alive; iterating again returns documents inserted since.
    TAILABLE = 2
    #: Like TAILABLE, but at the end it waits up to ``max_await_ms``
    #: (default 1000) for new documents before stopping.
    TAILABLE_AWAIT = 34
    #: Accepted for compatibility; the same as NON_TAILABLE here.
    EXHAUST = 64


_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_size(size: Union[int, str]) -> int:
    """Bytes in ``size``: an int, or a string such as ``"64MB"`` or
    ``"1.5GiB"`` (units are powers of 1024, as WiredTiger reads them)."""
    if isinstance(size, bool):
        raise TypeError("a size is an int or a string such as '64MB'")
    if isinstance(size, int):
        if size < 0:
            raise errors.ConfigurationError(f"size {size} is negative")
        return size
    if isinstance(size, str):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", size)
        if m and m.group(2).lower() in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
        raise errors.ConfigurationError(f"size {size!r}: expected a number and a unit such as 64MB")
    raise TypeError(f"a size is an int or a string such as '64MB', not {type(size).__name__}")


def _encode(doc: Any, codec: CodecOptions) -> bytes:
    """A document as BSON bytes, ``_id`` first."""
    if isinstance(doc, RawBSONDocument):
        return doc.raw
    if not isinstance(doc, Mapping):
        raise TypeError(f"document must be a dict or another mapping, not {type(doc).__name__}")
    try:
        return bson.encode(doc, codec_options=codec)
    except bson.errors.InvalidDocument as e:
        raise InvalidDocument(str(e)) from e
    except (OverflowError, TypeError) as e:
        raise InvalidDocument(str(e)) from e


def _value(v: Any, codec: CodecOptions) -> bytes:
    """One BSON value, carried as the document ``{'v': v}``."""
    return _encode({"v": v}, codec)


def _with_id(doc: Any) -> Any:
    """``doc`` with an ``_id``: as pymongo does, an ObjectId is added to the
    caller's dict when it has none."""
    if isinstance(doc, RawBSONDocument):
        if "_id" in doc:
            return doc
        doc = dict(doc)
    if not isinstance(doc, Mapping):
        raise TypeError(f"document must be a dict or another mapping, not {type(doc).__name__}")
    if "_id" not in doc:
        try:
            doc["_id"] = ObjectId()  # type: ignore[index]
        except TypeError:
            doc = {"_id": ObjectId(), **doc}
    return doc


# ---------------------------------------------------------------- results


class InsertOneResult:
    """What ``insert_one`` did."""

    __slots__ = ("inserted_id",)

    def __init__(self, inserted_id: Any) -> None:
        self.inserted_id = inserted_id

    @property
    def acknowledged(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"InsertOneResult({self.inserted_id!r})"


class InsertManyResult:
    """What ``insert_many`` did."""

    __slots__ = ("inserted_ids",)

    def __init__(self, inserted_ids: List[Any]) -> None:
        self.inserted_ids = inserted_ids

    @property
    def acknowledged(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"InsertManyResult({self.inserted_ids!r})"


class UpdateResult:
    """What ``replace_one`` did."""

    __slots__ = ("matched_count", "modified_count", "upserted_id")

    def __init__(self, matched: int, modified: int, upserted_id: Any = None) -> None:
        self.matched_count = matched
        self.modified_count = modified
        self.upserted_id = upserted_id

    @property
    def acknowledged(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"UpdateResult(matched_count={self.matched_count}, modified_count={self.modified_count}, upserted_id={self.upserted_id!r})"


class DeleteResult:
    """What ``delete_one`` did."""

    __slots__ = ("deleted_count",)

    def __init__(self, deleted: int) -> None:
        self.deleted_count = deleted

    @property
    def acknowledged(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"DeleteResult(deleted_count={self.deleted_count})"


# ---------------------------------------------------------------- queries

_ID_OPS = {"$eq", "$gt", "$gte", "$lt", "$lte", "$in"}
_MISSING = object()


def _is_operator_doc(v: Any) -> bool:
    return isinstance(v, Mapping) and len(v) > 0 and all(isinstance(k, str) and k.startswith("$") for k in v)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, bson.Int64, bson.Decimal128)) and not isinstance(v, bool)


def _num(v: Any) -> Any:
    return v.to_decimal() if isinstance(v, bson.Decimal128) else v


def _bracket(v: Any) -> int:
    """MongoDB compares values of one type bracket only."""
    if v is None:
        return 0
    if _number(v):
        return 1
    if isinstance(v, str):
        return 2
    if isinstance(v, Mapping):
        return 3
    if isinstance(v, (list, tuple)):
        return 4
    if isinstance(v, (bytes, bson.Binary)):
        return 5
    if isinstance(v, ObjectId):
        return 6
    if isinstance(v, bool):
        return 7
    if hasattr(v, "utcoffset"):
        return 8
    return 9


def _equal(a: Any, b: Any) -> bool:
    if _bracket(a) != _bracket(b):
        return False
    if _number(a):
        try:
            return _num(a) == _num(b)
        except Exception:
            return float(_num(a)) == float(_num(b))
    return bool(a == b)


def _compare(a: Any, b: Any, op: str) -> bool:
    if _bracket(a) != _bracket(b) or _bracket(a) in (0, 3, 4):
        return False
    x, y = (_num(a), _num(b)) if _number(a) else (a, b)
    try:
        if op == "$gt":
            return bool(x > y)
        if op == "$gte":
            return bool(x >= y)
        if op == "$lt":
            return bool(x < y)
        return bool(x <= y)
    except TypeError:
        return False


def _candidates(doc: Any, path: Sequence[str]) -> List[Any]:
    """Values at a dotted path, with MongoDB's array traversal: an array
    along the way is searched element by element, and an array at the end
    matches as a whole or by any element."""
    if not path:
        if isinstance(doc, list):
            return [doc, *doc]
        return [doc]
    if isinstance(doc, Mapping):
        if path[0] not in doc:
            return []
        return _candidates(doc[path[0]], path[1:])
    if isinstance(doc, list):
        if path[0].isdigit() and int(path[0]) < len(doc):
            return _candidates(doc[int(path[0])], path[1:])
        out: List[Any] = []
        for item in doc:
            if isinstance(item, Mapping):
                out.extend(_candidates(item, path))
        return out
    return []


def _field_matches(doc: Any, field: str, cond: Any) -> bool:
    vals = _candidates(doc, field.split("."))
    if not _is_operator_doc(cond):
        return any(_equal(v, cond) for v in vals)
    for op, arg in cond.items():
        if op == "$eq":
            ok = any(_equal(v, arg) for v in vals)
        elif op == "$ne":
            ok = not any(_equal(v, arg) for v in vals)
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            ok = any(_compare(v, arg, op) for v in vals)
        elif op == "$in":
            ok = any(_equal(v, a) for v in vals for a in arg)
        elif op == "$nin":
            ok = not any(_equal(v, a) for v in vals for a in arg)
        elif op == "$exists":
            ok = bool(vals) == bool(arg)
        else:
            raise OperationFailure(f"unknown or unsupported query operator {op!r}")
        if not ok:
            return False
    return True


def _check_filter(flt: Mapping) -> None:
    """Raises for an operator tidemark cannot evaluate, before any read."""
    for key, cond in flt.items():
        if key in ("$and", "$or", "$nor"):
            if not isinstance(cond, (list, tuple)) or not cond:
                raise OperationFailure(f"{key} needs a non-empty list")
            for sub in cond:
                if not isinstance(sub, Mapping):
                    raise OperationFailure(f"{key} needs a list of filters")
                _check_filter(sub)
        elif key.startswith("$"):
            raise OperationFailure(f"unknown or unsupported top-level operator {key!r}")
        elif _is_operator_doc(cond):
            for op, arg in cond.items():
                if op not in ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"):
                    raise OperationFailure(f"unknown or unsupported query operator {op!r}")
                if op in ("$in", "$nin") and not isinstance(arg, (list, tuple)):
                    raise OperationFailure(f"{op} needs a list")


def _matches(doc: Mapping, flt: Mapping) -> bool:
    for key, cond in flt.items():
        if key == "$and":
            if not all(_matches(doc, f) for f in cond):
                return False
        elif key == "$or":
            if not any(_matches(doc, f) for f in cond):
                return False
        elif key == "$nor":
            if any(_matches(doc, f) for f in cond):
                return False
        elif not _field_matches(doc, key, cond):
            return False
    return True


class _Plan:
    """How a filter is answered: by ``_id`` lookups, an ``_id`` range, or a
    scan; the whole filter is always checked on every document returned."""

    def __init__(self, flt: Optional[Mapping]) -> None:
        self.filter: Mapping = flt or {}
        _check_filter(self.filter)
        self.ids: Optional[List[Any]] = None
        self.lo: Any = _MISSING
        self.lo_inclusive = True
        self.hi: Any = _MISSING
        self.hi_inclusive = False
        if "_id" not in self.filter:
            return
        cond = self.filter["_id"]
        if not _is_operator_doc(cond):
            self.ids = [cond]
            return
        if not set(cond) <= _ID_OPS:
            return
        if "$eq" in cond:
            self.ids = [cond["$eq"]]
        elif "$in" in cond:
            self.ids = list(cond["$in"])
        else:
            # A range over one type bracket walks the _id index.
            bounds = [v for k, v in cond.items()]
            if len({_bracket(b) for b in bounds}) != 1 or _bracket(bounds[0]) in (0, 3, 4, 9):
                return
            for op, v in cond.items():
                if op in ("$gt", "$gte"):
                    self.lo, self.lo_inclusive = v, op == "$gte"
                else:
                    self.hi, self.hi_inclusive = v, op == "$lte"

    @property
    def ranged(self) -> bool:
        return self.lo is not _MISSING or self.hi is not _MISSING


def _sort_spec(key_or_list: Any, direction: Any = None) -> Tuple[str, int]:
    if isinstance(key_or_list, str):
        spec = [(key_or_list, ASCENDING if direction is None else direction)]
    elif isinstance(key_or_list, Mapping):
        spec = list(key_or_list.items())
    else:
        spec = [tuple(s) for s in key_or_list]
    if len(spec) != 1:
        raise OperationFailure("tidemark sorts by one key: $natural or _id")
    key, d = spec[0]
    if key not in ("$natural", "_id") or d not in (1, -1):
        raise OperationFailure(f"tidemark sorts by $natural or _id, ascending (1) or descending (-1); got {key!r}: {d!r}")
    return key, d


def _project(doc: dict, projection: Any) -> dict:
    if projection is None:
        return doc
    if isinstance(projection, (list, tuple)):
        projection = {f: 1 for f in projection}
    keep_id = bool(projection.get("_id", 1))
    fields = {k: bool(v) for k, v in projection.items() if k != "_id"}
    if any(fields.values()):
        out = {k: doc[k] for k in fields if fields[k] and k in doc}
        if keep_id and "_id" in doc:
            out = {"_id": doc["_id"], **out}
        return out
    out = {k: v for k, v in doc.items() if fields.get(k, True)}
    if not keep_id:
        out.pop("_id", None)
    return out


class Cursor:
    """The documents of a ``find``, read lazily. Chain ``sort``, ``skip`` and
    ``limit`` before iterating. A tailable cursor stays ``alive`` when its
    iteration stops: iterate again for documents inserted since."""

    def __init__(
        self,
        collection: "Collection",
        native: Any,
        flt: Optional[Mapping],
        projection: Any,
        skip: int,
        limit: int,
        sort: Any,
        cursor_type: int,
        max_await_ms: Optional[int],
    ) -> None:
        if flt is not None and not isinstance(flt, Mapping):
            raise TypeError(f"filter must be a dict, not {type(flt).__name__}")
        if not isinstance(skip, int) or skip < 0:
            raise ValueError("skip must be a non-negative int")
        if not isinstance(limit, int) or limit < 0:
            raise ValueError("limit must be a non-negative int")
        self._coll = collection
        self._native = native
        self._plan = _Plan(flt)
        self._projection = projection
        self._skip = skip
        self._limit = limit
        self._sort: Optional[Tuple[str, int]] = None
        self._type = CursorType(cursor_type)
        self._tailable = self._type in (CursorType.TAILABLE, CursorType.TAILABLE_AWAIT)
        self._await = 1000 if max_await_ms is None else int(max_await_ms)
        self._source: Any = None
        self._returned = 0
        self._skipped = 0
        self._alive = True
        if sort is not None:
            self.sort(sort)

    def _check_unstarted(self) -> None:
        if self._source is not None:
            raise InvalidOperation("cannot change a cursor after iteration has begun")

    def sort(self, key_or_list: Any, direction: Any = None) -> "Cursor":
        """Order by ``$natural`` (insertion order) or ``_id``, 1 or -1."""
        self._check_unstarted()
        spec = _sort_spec(key_or_list, direction)
        if self._tailable and spec != ("$natural", 1):
            raise InvalidOperation("a tailable cursor reads in natural order")
        self._sort = spec
        return self

    def skip(self, n: int) -> "Cursor":
        self._check_unstarted()
        if not isinstance(n, int) or n < 0:
            raise ValueError("skip must be a non-negative int")
        self._skip = n
        return self

    def limit(self, n: int) -> "Cursor":
        self._check_unstarted()
        if not isinstance(n, int) or n < 0:
            raise ValueError("limit must be a non-negative int")
        self._limit = n
        return self

    @property
    def alive(self) -> bool:
        """Whether iterating may return more documents."""
        return self._alive

    def close(self) -> None:
        self._alive = False
        self._source = None

    def _open(self) -> Any:
        n, p = self._native, self._plan
        if n is None:  # the collection does not exist: nothing to read
            if self._tailable:
                raise CollectionNotFound(f"collection {self._coll.name!r} does not exist")
            return iter(())
        if self._tailable:
            if not hasattr(n, "tail"):
                raise InvalidOperation("a snapshot cannot be tailed")
            wait = self._await if self._type == CursorType.TAILABLE_AWAIT else 0
            return n.tail(wait)
        codec = self._coll._codec
        key, direction = self._sort or ("$natural", 1)
        if p.ids is not None:
            found = [n.find_one(_value(i, codec)) for i in p.ids]
            raws = [r for r in found if r is not None]
            if key == "_id" or len(raws) < 2:
                docs = [(bson.decode(r, codec_options=codec), r) for r in raws]
                if key == "_id":
                    docs.sort(key=lambda d: _id_sort_key(d[0]["_id"]), reverse=direction < 0)
                return iter([r for _, r in docs])
            return iter(raws) if direction > 0 else iter(reversed(raws))
        if key == "_id" or (self._sort is None and p.ranged):
            lo = None if p.lo is _MISSING else _value(p.lo, codec)
            hi = None if p.hi is _MISSING else _value(p.hi, codec)
            return n.find_range(lo, p.lo_inclusive, hi, p.hi_inclusive, direction < 0)
        return n.find(direction < 0)

    def __iter__(self) -> "Cursor":
        return self

    def __next__(self) -> dict:
        if not self._alive:
            raise StopIteration
        if self._limit and self._returned >= self._limit:
            self._alive = False
            raise StopIteration
        if self._source is None:
            try:
                self._source = self._open()
            except BaseException:
                self._alive = False
                raise
        codec = self._coll._codec
        while True:
            try:
                if self._tailable:
                    raw = self._source.next()
                    if raw is None:
                        raise StopIteration  # alive: iterate again later
                else:
                    raw = next(self._source)
            except StopIteration:
                if not self._tailable:
                    self._alive = False
                raise
            except BaseException:
                self._alive = False
                raise
            doc = bson.decode(raw, codec_options=codec)
            if self._plan.filter and not _matches(doc, self._plan.filter):
                continue
            if self._skipped < self._skip:
                self._skipped += 1
                continue
            self._returned += 1
            return _project(doc, self._projection)

    next = __next__

    def to_list(self, length: Optional[int] = None) -> List[dict]:
        """The remaining documents (at most ``length``) as a list."""
        out: List[dict] = []
        for d in self:
            out.append(d)
            if length is not None and len(out) >= length:
                break
        return out

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _id_sort_key(v: Any) -> Tuple[int, Any]:
    b = _bracket(v)
    return (b, _num(v) if b == 1 else (str(v) if b in (3, 4, 9) else v))


# ---------------------------------------------------------------- collections


class _Reader:
    """Reads shared by collections and their snapshot views."""

    _codec: CodecOptions
    name: str

    def _reader(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def find(
        self,
        filter: Optional[Mapping] = None,
        projection: Any = None,
        skip: int = 0,
        limit: int = 0,
        sort: Any = None,
        cursor_type: int = CursorType.NON_TAILABLE,
        max_await_ms: Optional[int] = None,
    ) -> Cursor:
        """Documents matching ``filter``, in natural order unless sorted.

        ``sort=[("$natural", -1)]`` reads newest first; ``sort=[("_id", 1)]``
        reads in ``_id`` order. A filter on ``_id`` (equality, ``$in``, or a
        range of ``$gt``/``$gte``/``$lt``/``$lte``) is answered by the ``_id``
        index; other conditions (equality, ``$ne``, ``$gt``, ``$gte``,
        ``$lt``, ``$lte``, ``$in``, ``$nin``, ``$exists``, ``$and``, ``$or``,
        ``$nor`` on dotted paths) are checked on each document read.
        ``cursor_type=CursorType.TAILABLE_AWAIT`` on a capped collection
        makes a tailable cursor that waits ``max_await_ms`` for new
        documents."""
        return Cursor(self, self._reader(), filter, projection, skip, limit, sort, cursor_type, max_await_ms)

    def find_one(self, filter: Any = None, *args: Any, **kwargs: Any) -> Optional[dict]:
        """The first document matching ``filter`` (a dict, or an ``_id``
        value), or ``None``."""
        if filter is not None and not isinstance(filter, Mapping):
            filter = {"_id": filter}
        kwargs["limit"] = 1
        for d in self.find(filter, *args, **kwargs):
            return d
        return None

    def count_documents(self, filter: Optional[Mapping] = None) -> int:
        """Documents matching ``filter``."""
        if not filter:
            n = self._reader()
            return 0 if n is None else n.count()
        return sum(1 for _ in self.find(filter))


class Collection(_Reader):
    """A collection of documents. Made by :meth:`Database.get_collection`
    (created on first write, as in pymongo) or
    :meth:`Database.create_collection`."""

    def __init__(self, database: "Database", name: str, native: Any = None) -> None:
        self._db = database
        self.name = name
        self._native = native
        self._codec = database.codec_options

    def __repr__(self) -> str:
        return f"Collection({self._db!r}, {self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collection) and other._db is self._db and other.name == self.name

    def __hash__(self) -> int:
        return hash((id(self._db), self.name))

    @property
    def database(self) -> "Database":
        return self._db

    @property
    def full_name(self) -> str:
        return self.name

    def _handle(self, create: bool) -> Any:
        if self._native is None:
            db = self._db._live()
            try:
                self._native = db.get_collection(self.name)
            except CollectionNotFound:
                if not create:
                    return None
                self._native = db.collection(self.name)
        return self._native

    def _reader(self) -> Any:
        return self._handle(False)

    def insert_one(self, document: Any, durability: _Durability = None) -> InsertOneResult:
        """Inserts ``document`` (an ObjectId ``_id`` is added to it if it
        has none) with the database's durability or the one given
        ("none", "write" or "fsync")."""
        document = _with_id(document)
        raw = _encode(document, self._codec)
        self._handle(True).insert_one(raw, durability)
        return InsertOneResult(document["_id"])

    def insert_many(
        self, documents: Iterable[Any], ordered: bool = True, durability: _Durability = None
    ) -> InsertManyResult:
        """Inserts every document or none (one atomic batch)."""
        if isinstance(documents, Mapping) or not isinstance(documents, Iterable):
            raise TypeError("documents must be a non-empty list of documents")
        docs = [_with_id(d) for d in documents]
        if not docs:
            raise TypeError("documents must be a non-empty list of documents")
        raws = [_encode(d, self._codec) for d in docs]
        self._handle(True).insert_many(raws, durability)
        return InsertManyResult([d["_id"] for d in docs])

    def _target(self, filter: Any) -> Optional[Any]:
        """The ``_id`` of the first document ``filter`` matches."""
        if filter is None or not isinstance(filter, Mapping):
            raise TypeError("filter must be a dict")
        if set(filter) == {"_id"} and not _is_operator_doc(filter["_id"]):
            return filter["_id"]
        d = self.find_one(filter, projection={"_id": 1})
        return None if d is None else d["_id"]

    def replace_one(self, filter: Mapping, replacement: Any, upsert: bool = False) -> UpdateResult:
        """Replaces the first document ``filter`` matches. A capped
        collection's document may only be replaced by one of the same size."""
        if not isinstance(replacement, Mapping):
            raise TypeError("replacement must be a dict")
        if any(isinstance(k, str) and k.startswith("$") for k in replacement):
            raise ValueError("replacement can not include $ operators")
        target = self._target(filter)
        matched = False
        if target is not None:
            if "_id" in replacement and not _equal(replacement["_id"], target):
                raise WriteError("the _id of a document cannot be changed by a replace")
            body = {k: v for k, v in replacement.items() if k != "_id"}
            native = self._handle(False)
            if native is not None:
                matched = native.replace_one(_value(target, self._codec), _encode(body, self._codec))
        if matched:
            return UpdateResult(1, 1)
        if not upsert:
            return UpdateResult(0, 0)
        doc = dict(replacement)
        if "_id" not in doc and "_id" in filter and not _is_operator_doc(filter["_id"]):
            doc = {"_id": filter["_id"], **doc}
        res = self.insert_one(doc)
        return UpdateResult(0, 0, res.inserted_id)

    def delete_one(self, filter: Mapping) -> DeleteResult:
        """Deletes the first document ``filter`` matches (refused on capped
        collections, as in MongoDB)."""
        native = self._handle(False)
        if native is None:
            return DeleteResult(0)
        target = self._target(filter)
        if target is None:
            if native.capped is not None:
                raise errors.CappedOperationError("cannot remove from a capped collection")
            return DeleteResult(0)
        return DeleteResult(int(native.delete_one(_value(target, self._codec))))

    def estimated_document_count(self) -> int:
        n = self._handle(False)
        return 0 if n is None else n.count()

    def options(self) -> dict:
        """``{'capped': True, 'size': ..., 'max': ...}`` for a capped
        collection, else ``{}``."""
        n = self._handle(False)
        if n is None or n.capped is None:
            return {}
        size, mx = n.capped
        out: dict = {"capped": True, "size": size}
        if mx is not None:
            out["max"] = mx
        return out

    def is_capped(self) -> bool:
        return bool(self.options())

    def layout(self) -> List[int]:
        """Physical byte offset in the ring of every record of a capped
        collection, in natural order."""
        n = self._handle(False)
        if n is None:
            raise CollectionNotFound(f"collection {self.name!r} does not exist")
        return n.layout()

    def validate(self) -> dict:
        """Checks every record and index entry: counts, data and wasted
        bytes, and for a capped collection the fragmentation ratio,
        discontinuities and wraps; ``problems`` lists what is wrong."""
        n = self._handle(False)
        if n is None:
            raise CollectionNotFound(f"collection {self.name!r} does not exist")
        return n.validate()

    def drop(self) -> None:
        self._db.drop_collection(self.name)


class SnapshotCollection(_Reader):
    """A collection as of a snapshot: ``find``, ``find_one`` and
    ``count_documents`` see it as it was when the snapshot began."""

    def __init__(self, snapshot: "Snapshot", name: str, native: Any) -> None:
        self._snapshot = snapshot
        self.name = name
        self._native = native
        self._codec = snapshot._db.codec_options

    def _reader(self) -> Any:
        return self._native

    def __repr__(self) -> str:
        return f"SnapshotCollection({self.name!r})"


# ---------------------------------------------------------------- batches and transactions


class Batch:
    """Writes applied together, atomically, when the ``with`` block ends
    without an exception (or at :meth:`commit`)."""

    def __init__(self, db: "Database", durability: _Durability) -> None:
        self._db = db
        self._durability = durability
        self._native = _tidemark.Batch()
        self._done = False

    def put(self, table: str, key: bytes, value: bytes) -> "Batch":
        self._native.put(table, key, value)
        return self

    def delete(self, table: str, key: bytes) -> "Batch":
        self._native.delete(table, key)
        return self

    def insert_one(self, collection: str, document: Any) -> Any:
        """Adds the insert of ``document`` into ``collection`` (created if
        it does not exist); returns its ``_id``."""
        document = _with_id(document)
        raw = _encode(document, self._db.codec_options)
        self._db._live().collection(collection)
        self._native.insert_one(collection, raw)
        return document["_id"]

    def __len__(self) -> int:
        return len(self._native)

    def commit(self) -> None:
        if self._done:
            raise InvalidOperation("the batch was already applied")
        self._done = True
        if len(self._native):
            self._db._live().write(self._native, self._durability)

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None and not self._done:
            self.commit()


class _TxnTable:
    def __init__(self, txn: Any, name: str) -> None:
        self._txn, self.name = txn, name

    def get(self, key: bytes) -> Optional[bytes]:
        return self._txn.get(self.name, key)

    def range(self, lo: Optional[bytes] = None, hi: Optional[bytes] = None, reverse: bool = False, limit: Optional[int] = None) -> Iterator[Tuple[bytes, bytes]]:
        return self._txn.range(self.name, lo, hi, reverse, limit)


class _WriteTable(_TxnTable):
    def put(self, key: bytes, value: bytes) -> None:
        self._txn.put(self.name, key, value)

    def delete(self, key: bytes) -> None:
        self._txn.delete(self.name, key)


class Transaction:
    """A snapshot-isolated write transaction: reads see its snapshot and its
    own writes; it commits when the ``with`` block ends without an
    exception (raising :class:`ConflictError` if another transaction that
    committed since it began wrote one of its keys), else rolls back."""

    def __init__(self, db: "Database", durability: _Durability) -> None:
        self._durability = durability
        self._native = db._live().begin_write()

    def table(self, name: str) -> _WriteTable:
        return _WriteTable(self._native, name)

    def get(self, table: str, key: bytes) -> Optional[bytes]:
        return self._native.get(table, key)

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self._native.put(table, key, value)

    def delete(self, table: str, key: bytes) -> None:
        self._native.delete(table, key)

    def range(self, table: str, lo: Optional[bytes] = None, hi: Optional[bytes] = None, reverse: bool = False, limit: Optional[int] = None) -> Iterator[Tuple[bytes, bytes]]:
        return self._native.range(table, lo, hi, reverse, limit)

    def commit(self, durability: _Durability = None) -> None:
        self._native.commit(durability or self._durability)

    def rollback(self) -> None:
        self._native.rollback()

    @property
    def active(self) -> bool:
        return self._native.active

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None and self._native.active:
            self.commit()
        else:
            self.rollback()


class Snapshot:
    """One consistent view of every table and collection, for as long as it
    lives; writers go on meanwhile. Ends at the end of the ``with`` block."""

    def __init__(self, db: "Database") -> None:
        self._db = db
        self._native = db._live().begin_read()

    def table(self, name: str) -> _TxnTable:
        return _TxnTable(self._native, name)

    def get(self, table: str, key: bytes) -> Optional[bytes]:
        return self._native.get(table, key)

    def range(self, table: str, lo: Optional[bytes] = None, hi: Optional[bytes] = None, reverse: bool = False, limit: Optional[int] = None) -> Iterator[Tuple[bytes, bytes]]:
        return self._native.range(table, lo, hi, reverse, limit)

    def get_collection(self, name: str) -> SnapshotCollection:
        """The collection as of the snapshot (CollectionNotFound if it did
        not exist then)."""
        return SnapshotCollection(self, name, self._native.get_collection(name))

    def __getitem__(self, name: str) -> SnapshotCollection:
        return self.get_collection(name)

    def is_valid(self) -> bool:
        return self._native.is_valid()

    def release(self) -> None:
        self._native.release()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


# ---------------------------------------------------------------- database


class Database:
    """An open tidemark database: a directory holding its data file, log
    segments and capped rings. Also a context manager that closes it.

    Options (all optional): ``cache_size`` (bytes or a string such as
    "64MB"), ``durability`` ("none", "write" or "fsync": the default of
    calls that name none), ``eviction_target``, ``eviction_trigger``,
    ``eviction_dirty_target``, ``eviction_dirty_trigger`` (percent of the
    cache), ``eviction_threads``, ``checkpoint_interval`` (seconds; 0 turns
    timed checkpoints off), ``checkpoint_log_size`` (bytes or string: a
    checkpoint starts once the log holds that much since the last one,
    default 1 GiB; 0 turns that off), ``checkpoint_flush_nice`` (0 to 19,
    default 19: the CPU priority, on Linux, of the thread that pushes a
    checkpoint's writes to the device and syncs them; negative: the
    checkpointing thread does it), ``write_back_interval`` (seconds,
    default 20: how long the data file may go between checkpoints
    without its cached writes being pushed to the device and synced; 0
    turns that off), ``os_cache`` (``"auto"``, the default: under a memory
    limit, such as a container's, that the data file outgrows, the file's
    pages leave the OS page cache behind each read and write; ``"keep"``:
    never; ``"drop"``: always, on Linux 6.14 and later),
    ``log_segment_size`` (bytes or string), ``page_size`` (bytes of
    every page of a new database: 4096, 8192, 16384, the default, or
    32768; keys may take a quarter of a page, at most 4 KiB; an existing
    database keeps its own),
    ``version_budget`` (percent of the cache old versions may hold),
    ``statistics_log`` (True: a line of every counter each 10 s in the
    database directory; False: off; or ``{"interval": seconds, "path":
    directory}``), ``control_socket`` (serve ``tidemark stat`` and
    ``tidemark backup`` while open), and ``codec_options`` (a
    ``bson.codec_options.CodecOptions`` for decoding documents)."""

    def __init__(
        self,
        path: Any,
        *,
        cache_size: Union[int, str, None] = None,
        durability: _Durability = None,
        codec_options: Optional[CodecOptions] = None,
        eviction_target: Optional[int] = None,
        eviction_trigger: Optional[int] = None,
        eviction_dirty_target: Optional[int] = None,
        eviction_dirty_trigger: Optional[int] = None,
        eviction_threads: Optional[int] = None,
        checkpoint_interval: Optional[float] = None,
        checkpoint_log_size: Union[int, str, None] = None,
        checkpoint_flush_nice: Optional[int] = None,
        write_back_interval: Optional[float] = None,
        os_cache: Optional[str] = None,
        log_segment_size: Union[int, str, None] = None,
        page_size: Union[int, str, None] = None,
        version_budget: Optional[int] = None,
        statistics_log: Union[bool, Mapping] = True,
        control_socket: bool = False,
    ) -> None:
        if isinstance(statistics_log, Mapping):
            unknown = set(statistics_log) - {"interval", "path"}
            if unknown:
                raise errors.ConfigurationError(f"unknown statistics_log options {sorted(unknown)}")
            stats_on, stats_interval = True, statistics_log.get("interval")
            stats_path = statistics_log.get("path")
        else:
            stats_on, stats_interval, stats_path = bool(statistics_log), None, None
        self.codec_options = codec_options or DEFAULT_CODEC_OPTIONS
        self._native = _tidemark.Database(
            str(path),
            cache_size=None if cache_size is None else parse_size(cache_size),
            durability=durability,
            eviction_target=eviction_target,
            eviction_trigger=eviction_trigger,
            eviction_dirty_target=eviction_dirty_target,
            eviction_dirty_trigger=eviction_dirty_trigger,
            eviction_threads=eviction_threads,
            checkpoint_interval=checkpoint_interval,
            checkpoint_log_size=None if checkpoint_log_size is None else parse_size(checkpoint_log_size),
            checkpoint_flush_nice=checkpoint_flush_nice,
            write_back_interval=write_back_interval,
            os_cache=os_cache,
            log_segment_size=None if log_segment_size is None else parse_size(log_segment_size),
            page_size=None if page_size is None else parse_size(page_size),
            version_budget=version_budget,
            statistics_log=stats_on,
            statistics_interval=None if stats_interval is None else float(stats_interval),
            statistics_path=None if stats_path is None else str(stats_path),
            control_socket=control_socket,
        )

    def _live(self) -> Any:
        return self._native

    def __repr__(self) -> str:
        state = "open" if self._native.is_open else "closed"
        return f"tidemark.Database({str(self._native.path)!r}, {state})"

    @property
    def path(self) -> str:
        return str(self._native.path)

    @property
    def durability(self) -> str:
        return self._native.durability

    @property
    def page_size(self) -> int:
        """Bytes of every page, chosen when the database was created."""
        return self._native.page_size

    @property
    def max_key_size(self) -> int:
        """Bytes of the longest key this database takes."""
        return self._native.max_key_size

    @property
    def closed(self) -> bool:
        return not self._native.is_open

    # key-value tables
    def table(self, name: str) -> Table:
        """Table ``name`` (created if needed): ``put``, ``get``, ``delete``,
        ``range(lo, hi, reverse=False)`` over ``bytes`` keys and values."""
        return self._native.table(name)

    def create_table(self, name: str) -> Table:
        return self._native.create_table(name)

    def drop_table(self, name: str) -> None:
        self._native.drop_table(name)

    def list_tables(self) -> List[str]:
        """Names of the key-value tables (not collections' own tables)."""
        return [t for t in self._native.list_tables() if not t.startswith("$")]

    # atomic groups
    def batch(self, durability: _Durability = None) -> Batch:
        """A batch of puts, deletes and document inserts, applied atomically
        at the end of its ``with`` block."""
        return Batch(self, durability)

    def transaction(self, durability: _Durability = None) -> Transaction:
        return Transaction(self, durability)

    def snapshot(self) -> Snapshot:
        return Snapshot(self)

    # collections
    def create_collection(
        self,
        name: str,
        capped: Union[bool, Mapping, None] = None,
        size: Union[int, str, None] = None,
        max: Optional[int] = None,
    ) -> Collection:
        """Creates a collection (CollectionInvalid if it exists). Capped:
        ``capped={"size": bytes, "max": documents or None}``, or pymongo's
        ``capped=True, size=..., max=...``."""
        if isinstance(capped, Mapping):
            unknown = set(capped) - {"size", "max"}
            if unknown:
                raise errors.ConfigurationError(f"unknown capped options {sorted(unknown)}")
            if capped.get("size") is None:
                raise errors.ConfigurationError("a capped collection needs a size")
            size, max = capped["size"], capped.get("max")
            capped = True
        if capped:
            if size is None:
                raise errors.ConfigurationError("a capped collection needs a size")
            nsize = parse_size(size)
            if max is not None and (not isinstance(max, int) or isinstance(max, bool) or max <= 0):
                raise errors.ConfigurationError("max must be a positive int or None")
            native = self._native.create_collection(name, nsize, max)
        else:
            if size is not None or max is not None:
                raise errors.ConfigurationError("size and max need capped=True")
            native = self._native.create_collection(name)
        return Collection(self, name, native)

    def get_collection(self, name: str) -> Collection:
        """Collection ``name``; if it does not exist, reads find nothing and
        the first write creates it (as in pymongo)."""
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        return Collection(self, name)

    def __getitem__(self, name: str) -> Collection:
        return self.get_collection(name)

    def list_collection_names(self) -> List[str]:
        return self._native.list_collections()

    def drop_collection(self, name_or_collection: Union[str, Collection]) -> None:
        name = name_or_collection.name if isinstance(name_or_collection, Collection) else name_or_collection
        try:
            self._native.drop_collection(name)
        except CollectionNotFound:
            pass  # as pymongo: dropping what is not there is fine

    # operations
    def stats(self) -> dict:
        """Every statistics counter: cache, eviction, checkpoints, log,
        snapshots and versions, capped collections."""
        return self._native.stats()

    def checkpoint(self) -> dict:
        return self._native.checkpoint()

    def backup(self, dest: Any) -> dict:
        """Writes a consistent copy into directory ``dest`` (new or empty)
        while other threads go on writing."""
        return self._native.backup(str(dest))

    def compact(self) -> dict:
        """Returns the free space at the end of the data file to the file
        system: ``{"size_before": ..., "size_after": ...}``."""
        return self._native.compact()

    def verify(self) -> dict:
        return self._native.verify()

    def close(self) -> None:
        """Checkpoints and closes; later calls on it or anything made from
        it raise :class:`DatabaseClosed`."""
        self._native.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open(path: Any, **options: Any) -> Database:  # noqa: A001 - the API's name
    """Opens (creating if needed) the database in directory ``path``; see
    :class:`Database` for the options."""
    return Database(path, **options)


__all__ = [
    "open",
    "Database",
    "Table",
    "Collection",
    "SnapshotCollection",
    "Cursor",
    "CursorType",
    "Batch",
    "Transaction",
    "Snapshot",
    "InsertOneResult",
    "InsertManyResult",
    "UpdateResult",
    "DeleteResult",
    "parse_size",
    "ASCENDING",
    "DESCENDING",
    "MAX_KEY_SIZE",
    "DEFAULT_PAGE_SIZE",
    "MAX_VALUE_SIZE",
    "MAX_DOCUMENT_SIZE",
    "errors",
    *errors.__all__,
]
