"""Document collections: pymongo-shaped CRUD, queries, BSON types, errors."""

import datetime

import bson
import pytest
from bson import Decimal128, Int64, ObjectId
from bson.codec_options import CodecOptions

import tidemark


def test_insert_find_replace_delete(db):
    users = db.get_collection("users")
    # Reads of a collection that does not exist yet find nothing.
    assert users.find_one({"_id": 1}) is None
    assert list(users.find()) == []
    assert "users" not in db.list_collection_names()
    doc = {"name": "ann"}
    res = users.insert_one(doc)
    assert isinstance(res.inserted_id, ObjectId)
    assert doc["_id"] == res.inserted_id  # added to the caller's dict, as pymongo does
    assert res.acknowledged
    assert db.list_collection_names() == ["users"]
    got = users.find_one({"_id": res.inserted_id})
    assert got == {"_id": res.inserted_id, "name": "ann"}
    assert list(got)[0] == "_id"
    assert users.find_one(res.inserted_id) == got  # a bare _id, as pymongo allows
    many = users.insert_many([{"_id": 2, "name": "bob"}, {"_id": 3, "name": "cy"}])
    assert many.inserted_ids == [2, 3]
    assert users.count_documents({}) == 3
    assert users.estimated_document_count() == 3
    r = users.replace_one({"_id": 2}, {"name": "bobby", "age": 40})
    assert (r.matched_count, r.modified_count) == (1, 1)
    assert users.find_one({"_id": 2}) == {"_id": 2, "name": "bobby", "age": 40}
    r = users.replace_one({"_id": 99}, {"name": "nobody"})
    assert (r.matched_count, r.upserted_id) == (0, None)
    r = users.replace_one({"_id": 99}, {"name": "new"}, upsert=True)
    assert r.upserted_id == 99
    assert users.find_one({"name": "new"})["_id"] == 99
    with pytest.raises(tidemark.WriteError):
        users.replace_one({"_id": 3}, {"_id": 4, "name": "moved"})
    with pytest.raises(ValueError):
        users.replace_one({"_id": 3}, {"$set": {"a": 1}})
    assert users.delete_one({"_id": 3}).deleted_count == 1
    assert users.delete_one({"_id": 3}).deleted_count == 0
    assert users.delete_one({"name": "bobby"}).deleted_count == 1
    assert [d["_id"] for d in users.find()] == [res.inserted_id, 99]


def test_natural_order_sorts_and_id_ranges(db):
    c = db["c"]
    ids = [5, 1, "b", 3.5, "a", 2]
    c.insert_many([{"_id": i, "n": n} for n, i in enumerate(ids)])
    assert [d["_id"] for d in c.find()] == ids
    assert [d["_id"] for d in c.find(sort=[("$natural", -1)])] == ids[::-1]
    # _id order is MongoDB's: numbers (int and double together), then strings.
    assert [d["_id"] for d in c.find(sort=[("_id", 1)])] == [1, 2, 3.5, 5, "a", "b"]
    assert [d["_id"] for d in c.find().sort("_id", -1)] == ["b", "a", 5, 3.5, 2, 1]
    assert [d["_id"] for d in c.find({"_id": {"$gte": 2, "$lt": 5}})] == [2, 3.5]
    assert [d["_id"] for d in c.find({"_id": {"$gt": 2}}, sort=[("_id", -1)])] == [5, 3.5]
    assert [d["_id"] for d in c.find({"_id": {"$in": [5, "a", 77]}})] == [5, "a"]
    # 1.0 and Int64(1) are the same _id as 1.
    assert c.find_one({"_id": 1.0})["n"] == 1
    assert c.find_one({"_id": Int64(1)})["n"] == 1
    with pytest.raises(tidemark.DuplicateKeyError):
        c.insert_one({"_id": 1.0})
    assert [d["n"] for d in c.find().skip(1).limit(2)] == [1, 2]
    assert c.find().to_list(2) == [{"_id": 5, "n": 0}, {"_id": 1, "n": 1}]
    with pytest.raises(tidemark.OperationFailure):
        c.find(sort=[("n", 1)])
    cur = c.find()
    next(cur)
    with pytest.raises(tidemark.InvalidOperation):
        cur.limit(1)


def test_filters_and_projection(db):
    c = db["q"]
    c.insert_many([
        {"_id": 1, "kind": "a", "n": 1, "tags": ["x", "y"], "sub": {"v": 10}},
        {"_id": 2, "kind": "b", "n": 2.5, "tags": ["y"], "sub": {"v": 20}},
        {"_id": 3, "kind": "a", "n": Int64(3), "sub": {"v": 30}},
        {"_id": 4, "kind": "c", "n": "text"},
    ])
    q = lambda f: [d["_id"] for d in c.find(f)]  # noqa: E731
    assert q({"kind": "a"}) == [1, 3]
    assert q({"n": {"$gte": 2}}) == [2, 3]  # "text" is not compared with numbers
    assert q({"n": {"$lt": 3, "$ne": 1}}) == [2]
    assert q({"tags": "y"}) == [1, 2]  # an array matches by any element
    assert q({"tags": ["y"]}) == [2]  # or as a whole
    assert q({"sub.v": {"$in": [10, 30]}}) == [1, 3]
    assert q({"tags": {"$exists": False}}) == [3, 4]
    assert q({"$or": [{"kind": "b"}, {"n": "text"}]}) == [2, 4]
    assert q({"kind": "a", "_id": {"$gt": 1}}) == [3]
    assert q({"kind": {"$nin": ["a", "b"]}}) == [4]
    assert c.count_documents({"kind": "a"}) == 2
    assert c.find_one({"kind": "c"}, projection={"n": 1}) == {"_id": 4, "n": "text"}
    assert c.find_one({"_id": 1}, projection={"tags": 0, "sub": 0, "_id": 0}) == {"kind": "a", "n": 1}
    with pytest.raises(tidemark.OperationFailure):
        c.find({"n": {"$regex": "t"}})
    with pytest.raises(tidemark.OperationFailure):
        c.find({"$where": "1"})
    with pytest.raises(TypeError):
        c.find("kind")


def test_bson_types_round_trip(db):
    c = db["types"]
    when = datetime.datetime(2026, 11, 22, 12, 30, 15, 123000)
    doc = {
        "_id": ObjectId(),
        "i64": Int64(1 << 40),
        "small64": Int64(7),
        "dec": Decimal128("1234.5678"),
        "when": when,
        "bin": bson.Binary(b"\x00\x01", 0),
        "nested": {"list": [1, "two", None, True, 2.5]},
    }
    c.insert_one(doc)
    raw_in = bson.encode(doc)
    got = c.find_one({"_id": doc["_id"]})
    assert got["dec"] == Decimal128("1234.5678")
    assert got["when"] == when
    assert got["nested"] == doc["nested"]
    # Byte for byte what pymongo encoded, so it moves to MongoDB unchanged.
    opts = CodecOptions(document_class=bson.raw_bson.RawBSONDocument)
    with tidemark.open(db.path + "-copy", codec_options=opts) as other:
        other["t"].insert_one(bson.raw_bson.RawBSONDocument(raw_in))
        assert other["t"].find_one({"_id": doc["_id"]}).raw == raw_in
    c.insert_one({"_id": "tz", "when": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)})
    assert c.find_one({"_id": "tz"})["when"] == datetime.datetime(2026, 1, 1)


def test_bad_documents_are_typed_errors_and_change_nothing(db):
    c = db["bad"]
    c.insert_one({"_id": 1})
    with pytest.raises(TypeError):
        c.insert_one(["not", "a", "dict"])
    with pytest.raises(tidemark.InvalidDocument) as e:
        c.insert_one({"_id": 2, 3: "int key"})
    assert isinstance(e.value, bson.errors.InvalidDocument)
    with pytest.raises(tidemark.InvalidDocument):
        c.insert_one({"_id": 2, "big": 1 << 70})
    with pytest.raises(tidemark.InvalidDocument):
        c.insert_one({"_id": [1, 2]})  # an array _id, as MongoDB refuses
    with pytest.raises(tidemark.DocumentTooLarge):
        c.insert_one({"_id": 3, "blob": b"x" * (tidemark.MAX_DOCUMENT_SIZE + 1)})
    with pytest.raises(tidemark.DuplicateKeyError):
        c.insert_one({"_id": 1})
    # insert_many is atomic: a duplicate inside refuses the whole call.
    with pytest.raises(tidemark.DuplicateKeyError):
        c.insert_many([{"_id": 10}, {"_id": 11}, {"_id": 10}])
    with pytest.raises(TypeError):
        c.insert_many([])
    with pytest.raises(tidemark.InvalidDocument):
        db._native.collection("bad").insert_one(b"\x05\x00\x00\x00\x01")  # corrupt BSON
    assert [d["_id"] for d in c.find()] == [1]
    with pytest.raises(tidemark.InvalidName):
        db.create_collection("")
    db.create_collection("dup")
    with pytest.raises(tidemark.CollectionInvalid):
        db.create_collection("dup")
    assert issubclass(tidemark.DuplicateKeyError, tidemark.TidemarkError)
    assert issubclass(tidemark.DocumentTooLarge, tidemark.InvalidDocument)


def test_drop_collection(db):
    db["gone"].insert_one({"_id": 1})
    db.drop_collection("gone")
    assert "gone" not in db.list_collection_names()
    assert db["gone"].find_one({"_id": 1}) is None
    db.drop_collection("never-there")
    db["gone"].insert_one({"_id": 1})
    db["gone"].drop()
    assert db.list_collection_names() == []
