//! Documents: BSON documents in named collections, regular or capped.
//!
//! A collection is described in table `$collections` (name -> kind, and
//! for a capped one its ring size, document limit and ring state). Its
//! `_id` index is table `$i.<name>` (encoded `_id`, see `idkey` -> where
//! the document is). A regular collection keeps its documents in table
//! `$d.<name>` under an 8-byte record id (big-endian, so key order is
//! natural order); the index maps to that id. A capped collection keeps
//! them in its ring (see `capped`); the index maps to the ring position and
//! record id.
//!
//! Every change is one logged batch, planned under the write gate with the
//! stripes of the keys it touches (a capped collection's inserts all take
//! the stripe of its description, which orders them): the plan decides the
//! record id or ring position, the records removed, and the table changes,
//! and the log record carries all of it, so replay applies exactly what
//! the commit applied.

pub(crate) mod cursor;
pub(crate) mod idkey;
mod snapshot;

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{Bson, Document};

use crate::capped::{self, RecordHead, Ring, RingState, Slot};
use crate::db::{Database, Op, Table, WriteBatch};
use crate::engine::{CollEntry, Engine, COLLECTIONS};
use crate::error::{Error, Result};
use crate::versions::Ts;
use crate::wal::record::LogOp;
use crate::wal::Durability;

pub use cursor::{Cursor, Tailable};
pub use snapshot::SnapshotCollection;

/// Largest document, as in MongoDB.
pub const MAX_DOCUMENT_SIZE: usize = 16 * 1024 * 1024;
/// Longest collection name (its tables' names add three bytes).
pub const MAX_COLLECTION_NAME: usize = crate::MAX_TABLE_NAME - 3;

/// Options of a capped collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CappedOptions {
    /// Ring size in bytes (records and their 40-byte headers).
    pub size: u64,
    /// Most documents kept, if limited.
    pub max: Option<u64>,
}

/// What `validate` found in a collection.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ValidateReport {
    /// Documents.
    pub count: u64,
    /// Bytes of the documents (for a capped collection: of its records,
    /// headers included).
    pub data_bytes: u64,
    /// Capped: bytes inside the ring's live span that hold no record (the
    /// skipped end of the ring); 0 otherwise.
    pub wasted_bytes: u64,
    /// Capped: ring size.
    pub ring_size: Option<u64>,
    /// Capped: the fragmentation ratio of the layout (1.00 is a perfect
    /// ring).
    pub fragmentation: Option<f64>,
    /// Capped: steps of natural order where the next record is neither
    /// right after the previous one nor at the ring's start after a wrap
    /// (0 for a ring buffer: natural order is physical order).
    pub discontinuities: Option<u64>,
    /// Capped: wraps within the live records (0 or 1).
    pub wraps: Option<u64>,
    /// Entries of the `_id` index.
    pub index_entries: u64,
    /// Checksum failures and inconsistencies; empty when sound.
    pub problems: Vec<String>,
}

/// A range of encoded index keys.
pub(crate) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// `_id` bounds as index key bounds.
pub(crate) fn encode_range(lo: Bound<&Bson>, hi: Bound<&Bson>) -> Result<KeyRange> {
    let enc = |b: Bound<&Bson>| -> Result<Bound<Vec<u8>>> {
        Ok(match b {
            Bound::Included(v) => Bound::Included(idkey::key_of(v)?),
            Bound::Excluded(v) => Bound::Excluded(idkey::key_of(v)?),
            Bound::Unbounded => Bound::Unbounded,
        })
    };
    Ok((enc(lo)?, enc(hi)?))
}

pub(crate) fn data_table(name: &str) -> String {
    format!("$d.{name}")
}
pub(crate) fn index_table(name: &str) -> String {
    format!("$i.{name}")
}

/// A collection's handles, shared by every [`Collection`] of it.
pub(crate) struct CollMeta {
    pub(crate) name: String,
    /// Root of `$d.<name>` (regular collections).
    data_root: Option<u64>,
    index_root: u64,
    pub(crate) ring: Option<Arc<Ring>>,
    /// Next record id (regular collections).
    next_rid: AtomicU64,
}

/// Checks a document, gives it an `_id` if it has none (first, as MongoDB
/// does), and returns the `_id`, its index key and the encoded document.
pub(crate) fn prepare(doc: &Document) -> Result<(Bson, Vec<u8>, Vec<u8>)> {
    let (id, with_id) = match doc.get("_id") {
        Some(id) => (id.clone(), None),
        None => {
            let id = Bson::ObjectId(bson::oid::ObjectId::new());
            let mut d = Document::new();
            d.insert("_id", id.clone());
            d.extend(doc.clone());
            (id, Some(d))
        }
    };
    let key = idkey::key_of(&id)?;
    let mut bytes = Vec::new();
    let whole = match &with_id {
        Some(d) => d,
        None => doc,
    };
    whole
        .to_writer(&mut bytes)
        .map_err(|e| Error::InvalidBson(e.to_string()))?;
    if bytes.len() > MAX_DOCUMENT_SIZE {
        return Err(Error::DocumentTooLarge {
            len: bytes.len(),
            max: MAX_DOCUMENT_SIZE,
        });
    }
    Ok((id, key, bytes))
}

/// Decodes raw BSON bytes given by a caller.
pub fn parse_document(bytes: &[u8]) -> Result<Document> {
    if bytes.len() > MAX_DOCUMENT_SIZE {
        return Err(Error::DocumentTooLarge {
            len: bytes.len(),
            max: MAX_DOCUMENT_SIZE,
        });
    }
    let doc = Document::from_reader(bytes).map_err(|e| Error::InvalidBson(e.to_string()))?;
    let declared = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    if declared != Some(bytes.len()) {
        return Err(Error::InvalidBson(
            "bytes after the end of the document".into(),
        ));
    }
    Ok(doc)
}

/// Decodes a stored document; damage is corruption, not bad input.
pub(crate) fn stored_document(bytes: &[u8], what: impl FnOnce() -> String) -> Result<Document> {
    Document::from_reader(bytes).map_err(|e| Error::corruption(0, format!("{}: {e}", what())))
}

fn id_text(id: &Bson) -> String {
    id.clone().into_relaxed_extjson().to_string()
}

/// One document change, resolved to its collection.
pub(crate) enum DocOp {
    Put {
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: String,
        key: Vec<u8>,
    },
    Insert {
        coll: Arc<CollMeta>,
        key: Vec<u8>,
        doc: Vec<u8>,
    },
    Replace {
        coll: Arc<CollMeta>,
        key: Vec<u8>,
        doc: Vec<u8>,
    },
    Remove {
        coll: Arc<CollMeta>,
        key: Vec<u8>,
    },
}

/// A planned change of the tree or of a ring.
enum Step {
    Put {
        root: u64,
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        root: u64,
        table: String,
        key: Vec<u8>,
    },
    Ring {
        ring: Arc<Ring>,
        pos: u64,
        /// The log op's key: position, and the state after an insert.
        pos_bytes: Vec<u8>,
        record: Arc<[u8]>,
        after: Option<RingState>,
        /// Lengths of the records it removes (for the stats).
        removed: Vec<u64>,
    },
}

struct Plan {
    steps: Vec<Step>,
    /// Per operation: whether it matched a document (replace, remove).
    matched: Vec<bool>,
}

fn root_of(e: &Engine, roots: &mut HashMap<String, u64>, table: &str) -> Result<u64> {
    if let Some(&r) = roots.get(table) {
        return Ok(r);
    }
    let r = e
        .lookup_root(table.as_bytes())?
        .ok_or_else(|| Error::TableNotFound(table.to_string()))?;
    roots.insert(table.to_string(), r);
    Ok(r)
}

fn index_value(ring: bool, pos: u64, rid: u64) -> Vec<u8> {
    if ring {
        let mut v = pos.to_le_bytes().to_vec();
        v.extend_from_slice(&rid.to_le_bytes());
        v
    } else {
        rid.to_be_bytes().to_vec()
    }
}

/// The key of a `RingWrite` log op: the position, then for an insert the
/// ring state after it.
fn ring_op_key(pos: u64, after: Option<RingState>) -> Vec<u8> {
    let mut k = pos.to_le_bytes().to_vec();
    if let Some(a) = after {
        k.extend_from_slice(&a.encode());
    }
    k
}

/// (ring position, record id) of a capped index value.
pub(crate) fn ring_location(v: &[u8]) -> Option<(u64, u64)> {
    Some((
        u64::from_le_bytes(v.get(..8)?.try_into().ok()?),
        u64::from_le_bytes(v.get(8..16)?.try_into().ok()?),
    ))
}

fn plan(e: &Engine, ops: &[DocOp]) -> Result<Plan> {
    let mut roots = HashMap::new();
    let mut steps = Vec::new();
    let mut matched = Vec::with_capacity(ops.len());
    // Per ring: the state as planned so far and the records planned.
    let mut rings: HashMap<String, (RingState, HashMap<u64, RecordHead>)> = HashMap::new();
    let mut added: HashSet<(String, Vec<u8>)> = HashSet::new();
    for op in ops {
        let mut hit = true;
        match op {
            DocOp::Put { table, key, value } => steps.push(Step::Put {
                root: root_of(e, &mut roots, table)?,
                table: table.clone(),
                key: key.clone(),
                value: value.clone(),
            }),
            DocOp::Delete { table, key } => steps.push(Step::Delete {
                root: root_of(e, &mut roots, table)?,
                table: table.clone(),
                key: key.clone(),
            }),
            DocOp::Insert { coll, key, doc } => {
                let itable = index_table(&coll.name);
                let exists = e.tree(coll.index_root).get(key)?.is_some();
                let dup = |removed: &[RecordHead]| {
                    ((exists && !removed.iter().any(|h| h.key == *key))
                        || added.contains(&(coll.name.clone(), key.clone())))
                    .then(|| -> Result<Error> {
                        let d = Document::from_reader(&doc[..])
                            .map_err(|e| Error::InvalidBson(e.to_string()))?;
                        Ok(Error::DuplicateKey {
                            collection: coll.name.clone(),
                            id: d.get("_id").map(id_text).unwrap_or_default(),
                        })
                    })
                };
                match &coll.ring {
                    None => {
                        if let Some(err) = dup(&[]) {
                            return Err(err?);
                        }
                        let Some(data_root) = coll.data_root else {
                            return Err(Error::corruption(0, "regular collection without data"));
                        };
                        let rid = coll.next_rid.fetch_add(1, Ordering::Relaxed);
                        steps.push(Step::Put {
                            root: data_root,
                            table: data_table(&coll.name),
                            key: rid.to_be_bytes().to_vec(),
                            value: doc.clone(),
                        });
                        steps.push(Step::Put {
                            root: coll.index_root,
                            table: itable,
                            key: key.clone(),
                            value: index_value(false, 0, rid),
                        });
                    }
                    Some(ring) => {
                        let (st, planned) = rings
                            .entry(coll.name.clone())
                            .or_insert_with(|| (ring.state(), HashMap::new()));
                        let len = capped::record_len(key.len(), doc.len());
                        let capped::Planned {
                            pos,
                            removed,
                            after,
                        } = ring.plan(st, len, &|p| planned.get(&p).cloned())?;
                        if let Some(err) = dup(&removed) {
                            return Err(err?);
                        }
                        let rid = st.next_id;
                        let record: Arc<[u8]> =
                            capped::encode_record(pos, rid, st.last, key, doc).into();
                        planned.insert(
                            pos,
                            RecordHead {
                                pos,
                                rid,
                                prev: st.last,
                                key: key.clone(),
                                doc_len: doc.len() as u32,
                            },
                        );
                        *st = after;
                        steps.push(Step::Ring {
                            ring: ring.clone(),
                            pos,
                            pos_bytes: ring_op_key(pos, Some(after)),
                            record,
                            after: Some(after),
                            removed: removed.iter().map(RecordHead::total).collect(),
                        });
                        for h in removed {
                            added.remove(&(coll.name.clone(), h.key.clone()));
                            steps.push(Step::Delete {
                                root: coll.index_root,
                                table: itable.clone(),
                                key: h.key,
                            });
                        }
                        steps.push(Step::Put {
                            root: coll.index_root,
                            table: itable,
                            key: key.clone(),
                            value: index_value(true, pos, rid),
                        });
                    }
                }
                added.insert((coll.name.clone(), key.clone()));
            }
            DocOp::Replace { coll, key, doc } => {
                match e.tree(coll.index_root).get(key)? {
                    None => hit = false,
                    Some(v) => match (&coll.ring, coll.data_root) {
                        (None, Some(data_root)) => steps.push(Step::Put {
                            root: data_root,
                            table: data_table(&coll.name),
                            key: v,
                            value: doc.clone(),
                        }),
                        (Some(ring), _) => {
                            let (pos, rid) = ring_location(&v).ok_or_else(|| {
                                Error::corruption(0, "capped index entry is malformed")
                            })?;
                            let Some(h) = ring.head_at(pos)?.filter(|h| h.rid == rid) else {
                                // Removed by an insert planned earlier in
                                // this batch.
                                matched.push(false);
                                continue;
                            };
                            if capped::record_len(key.len(), doc.len()) != h.total() {
                                return Err(Error::CappedOperation {
                                    collection: coll.name.clone(),
                                    what: "a replace that changes the document's size",
                                });
                            }
                            steps.push(Step::Ring {
                                ring: ring.clone(),
                                pos,
                                pos_bytes: ring_op_key(pos, None),
                                record: capped::encode_record(pos, rid, h.prev, key, doc).into(),
                                after: None,
                                removed: Vec::new(),
                            });
                        }
                        (None, None) => {
                            return Err(Error::corruption(0, "regular collection without data"))
                        }
                    },
                }
            }
            DocOp::Remove { coll, key } => {
                if coll.ring.is_some() {
                    return Err(Error::CappedOperation {
                        collection: coll.name.clone(),
                        what: "deleting a document",
                    });
                }
                match (e.tree(coll.index_root).get(key)?, coll.data_root) {
                    (Some(rid), Some(data_root)) => {
                        steps.push(Step::Delete {
                            root: data_root,
                            table: data_table(&coll.name),
                            key: rid,
                        });
                        steps.push(Step::Delete {
                            root: coll.index_root,
                            table: index_table(&coll.name),
                            key: key.clone(),
                        });
                    }
                    _ => hit = false,
                }
            }
        }
        matched.push(hit);
    }
    Ok(Plan { steps, matched })
}

fn log_ops(p: &Plan) -> Vec<LogOp<'_>> {
    p.steps
        .iter()
        .map(|s| match s {
            Step::Put {
                table, key, value, ..
            } => LogOp::Put {
                table: table.as_bytes(),
                key,
                value,
            },
            Step::Delete { table, key, .. } => LogOp::Delete {
                table: table.as_bytes(),
                key,
            },
            Step::Ring {
                ring,
                pos_bytes,
                record,
                ..
            } => LogOp::RingWrite {
                table: &ring.name,
                pos: pos_bytes,
                record,
            },
        })
        .collect()
}

fn apply(e: &Engine, p: Plan, ts: Option<Ts>) -> Result<(Vec<bool>, Vec<Arc<Ring>>)> {
    let mut touched: Vec<Arc<Ring>> = Vec::new();
    for s in p.steps {
        match s {
            Step::Put {
                root,
                table,
                key,
                value,
            } => e.apply_put(root, &key, &value, ts.map(|t| (t, table.as_bytes())))?,
            Step::Delete { root, table, key } => {
                e.apply_delete(root, &key, ts.map(|t| (t, table.as_bytes())))?;
            }
            Step::Ring {
                ring,
                pos,
                record,
                after,
                removed,
                ..
            } => {
                ring.apply(after, pos, record, e.wal.position());
                ring.removed
                    .fetch_add(removed.len() as u64, Ordering::Relaxed);
                ring.note_removed(&removed);
                if !touched.iter().any(|r| Arc::ptr_eq(r, &ring)) {
                    touched.push(ring);
                }
            }
        }
    }
    Ok((p.matched, touched))
}

impl Database {
    /// Runs document changes as one atomic, logged batch; per operation,
    /// whether it matched a document.
    pub(crate) fn write_docs(&self, ops: &[DocOp], durability: Durability) -> Result<Vec<bool>> {
        let e = self.engine();
        let stripes = ops
            .iter()
            .map(|op| match op {
                DocOp::Put { table, key, .. } | DocOp::Delete { table, key } => {
                    e.stripes.of(table.as_bytes(), key)
                }
                DocOp::Insert { coll, key, .. }
                | DocOp::Replace { coll, key, .. }
                | DocOp::Remove { coll, key } => match coll.ring {
                    Some(_) => e.stripes.of(COLLECTIONS.as_bytes(), coll.name.as_bytes()),
                    None => e.stripes.of(index_table(&coll.name).as_bytes(), key),
                },
            })
            .collect();
        let (matched, rings) = self.commit_planned(
            Some(stripes),
            |e| plan(e, ops),
            |e, p| e.log(&log_ops(p), durability),
            apply,
        )?;
        for r in rings {
            r.notify();
            let flushed = if durability == Durability::Fsync {
                r.flush(e.wal.group.synced())
            } else {
                Ok(())
            };
            let flushed = flushed.and_then(|()| {
                if r.over_limit() {
                    r.flush(e.wal.sync()?)
                } else {
                    if r.over_soft_limit() {
                        e.request_ring_flush();
                    }
                    Ok(())
                }
            });
            // The insert is logged; what failed is writing the ring file,
            // after which what it holds is unknown: stop, as a failed
            // checkpoint does (reopening replays the log).
            flushed.inspect_err(|err| {
                e.pager
                    .stop_writes(&format!("writing capped records failed: {err}"));
            })?;
        }
        Ok(matched)
    }

    /// [`Database::write`] of a batch holding document inserts.
    pub(crate) fn write_with_documents(&self, batch: &WriteBatch) -> Result<()> {
        let mut ops = Vec::with_capacity(batch.ops.len());
        for op in &batch.ops {
            ops.push(match op {
                Op::Put { table, key, value } => {
                    crate::db::check_key(key)?;
                    crate::db::check_value(value)?;
                    DocOp::Put {
                        table: table.clone(),
                        key: key.clone(),
                        value: value.clone(),
                    }
                }
                Op::Delete { table, key } => {
                    crate::db::check_key(key)?;
                    DocOp::Delete {
                        table: table.clone(),
                        key: key.clone(),
                    }
                }
                Op::Insert {
                    collection,
                    key,
                    doc,
                } => DocOp::Insert {
                    coll: self.get_collection(collection)?.meta,
                    key: key.clone(),
                    doc: doc.clone(),
                },
            });
        }
        let d = batch.durability.unwrap_or(self.default_durability());
        self.write_docs(&ops, d).map(|_| ())
    }

    /// Creates collection `name`: regular, or capped to a ring of
    /// `capped.size` bytes; [`Error::CollectionExists`] if it exists.
    pub fn create_collection(
        &self,
        name: &str,
        capped: Option<CappedOptions>,
    ) -> Result<Collection> {
        check_collection_name(name)?;
        if let Some(c) = capped {
            if c.size < capped::MIN_RING_SIZE || c.size > (1 << 46) {
                return Err(Error::InvalidOption(format!(
                    "capped size {} is outside {}..=2^46 bytes",
                    c.size,
                    capped::MIN_RING_SIZE
                )));
            }
            if c.max == Some(0) {
                return Err(Error::InvalidOption("capped max must be at least 1".into()));
            }
        }
        let cat = self.table(COLLECTIONS)?;
        self.table(&index_table(name))?;
        if capped.is_none() {
            self.table(&data_table(name))?;
        }
        let entry = CollEntry {
            capped: capped.map(|c| (c.size, c.max, RingState::empty())),
        }
        .encode();
        let key = name.as_bytes();
        let op = [LogOp::Put {
            table: COLLECTIONS.as_bytes(),
            key,
            value: &entry,
        }];
        let e = self.engine();
        // The ring file is filled before the commit, holding no lock; the
        // commit renames it into place. Removed if the creation fails.
        let prepared = match capped {
            Some(c) => Some(PreparedRing {
                fs: &*e.fs,
                path: capped::prepare_file(&*e.fs, &e.dir, key, c.size)?,
            }),
            None => None,
        };
        self.commit(
            &op,
            Some(vec![e.stripes.of(COLLECTIONS.as_bytes(), key)]),
            Durability::Fsync,
            |e| match e.collection_entry(key)? {
                Some(_) => Err(Error::CollectionExists(name.to_string())),
                None => Ok(()),
            },
            |e, (), ts| {
                e.collection_written(key, Some(&entry), prepared.as_ref().map(|p| &*p.path))?;
                e.apply_put(
                    cat.root(),
                    key,
                    &entry,
                    ts.map(|t| (t, COLLECTIONS.as_bytes())),
                )
            },
        )?;
        self.get_collection(name)
    }

    /// Opens collection `name`; [`Error::CollectionNotFound`] if absent.
    pub fn get_collection(&self, name: &str) -> Result<Collection> {
        check_collection_name(name)?;
        let e = self.engine();
        if let Some(m) = e.colls.lock().get(name) {
            return Ok(Collection {
                db: self.clone(),
                meta: m.clone(),
            });
        }
        let entry = e
            .collection_entry(name.as_bytes())?
            .ok_or_else(|| Error::CollectionNotFound(name.to_string()))?;
        let index_root = e
            .lookup_root(index_table(name).as_bytes())?
            .ok_or_else(|| Error::corruption(0, format!("collection {name:?} has no index")))?;
        let (data_root, ring, next_rid) = match entry.capped {
            Some(_) => (None, e.ring(name.as_bytes())?, 0),
            None => {
                let root = e.lookup_root(data_table(name).as_bytes())?.ok_or_else(|| {
                    Error::corruption(0, format!("collection {name:?} has no data table"))
                })?;
                let last = e
                    .tree(root)
                    .fetch_backward(&Bound::Unbounded, &Bound::Unbounded, 1)?
                    .entries
                    .first()
                    .and_then(|(k, _)| k.as_slice().try_into().ok())
                    .map_or(0, u64::from_be_bytes);
                (Some(root), None, last + 1)
            }
        };
        let meta = Arc::new(CollMeta {
            name: name.to_string(),
            data_root,
            index_root,
            ring,
            next_rid: AtomicU64::new(next_rid),
        });
        let meta = e
            .colls
            .lock()
            .entry(name.to_string())
            .or_insert(meta)
            .clone();
        Ok(Collection {
            db: self.clone(),
            meta,
        })
    }

    /// Opens collection `name`, creating a regular one if absent.
    pub fn collection(&self, name: &str) -> Result<Collection> {
        match self.get_collection(name) {
            Err(Error::CollectionNotFound(_)) => match self.create_collection(name, None) {
                Err(Error::CollectionExists(_)) => self.get_collection(name),
                r => r,
            },
            r => r,
        }
    }

    /// Names of all collections, in order.
    pub fn list_collections(&self) -> Result<Vec<String>> {
        match self.open_table(COLLECTIONS) {
            Err(Error::TableNotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
            Ok(t) => t
                .iter()
                .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
                .collect(),
        }
    }

    /// Drops collection `name`, its index and its ring file.
    pub fn drop_collection(&self, name: &str) -> Result<()> {
        let c = self.get_collection(name)?;
        let e = self.engine();
        let key = name.as_bytes();
        let cat = self.open_table(COLLECTIONS)?;
        let op = [LogOp::Delete {
            table: COLLECTIONS.as_bytes(),
            key,
        }];
        self.commit(
            &op,
            Some(vec![e.stripes.of(COLLECTIONS.as_bytes(), key)]),
            Durability::Fsync,
            |_| Ok(()),
            |e, (), ts| {
                e.collection_written(key, None, None)?;
                e.apply_delete(cat.root(), key, ts.map(|t| (t, COLLECTIONS.as_bytes())))
                    .map(|_| ())
            },
        )?;
        self.drop_table(&index_table(name))?;
        if c.meta.ring.is_none() {
            self.drop_table(&data_table(name))?;
        }
        Ok(())
    }
}

pub(crate) fn check_collection_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_COLLECTION_NAME {
        return Err(Error::InvalidTableName(name.to_string()));
    }
    Ok(())
}

/// A collection of BSON documents. Cheap to clone.
///
/// ```no_run
/// use tidemark::bson::{doc, Bson};
/// use tidemark::{CappedOptions, WriteBatch};
/// let db = tidemark::Database::open("data/app")?;
/// let users = db.collection("users")?;
/// let id = users.insert_one(&doc! {"name": "ann"})?;
/// users.insert_many(&[doc! {"_id": 7}, doc! {"_id": 8}])?;
/// users.replace_one(&Bson::Int32(7), &doc! {"name": "bob"})?;
/// users.delete_one(&id)?;
/// for d in users.find() {
///     let _d = d?;
/// }
/// let oplog = db.create_collection("oplog", Some(CappedOptions { size: 100 << 20, max: None }))?;
/// let mut b = WriteBatch::new();
/// b.put("kv", b"x", b"1");
/// b.insert_one("oplog", &doc! {"op": "i", "k": "x"})?;
/// db.write(&b)?;
/// let mut tail = oplog.tail(std::time::Duration::from_millis(500))?;
/// while let Some(_d) = tail.next_document()? {}
/// let _offsets = oplog.layout()?;
/// let _report = oplog.validate()?;
/// # Ok::<(), tidemark::Error>(())
/// ```
#[derive(Clone)]
pub struct Collection {
    db: Database,
    meta: Arc<CollMeta>,
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("name", &self.meta.name)
            .field("capped", &self.capped())
            .finish_non_exhaustive()
    }
}

impl Collection {
    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The capped options, if this is a capped collection.
    pub fn capped(&self) -> Option<CappedOptions> {
        self.meta.ring.as_ref().map(|r| CappedOptions {
            size: r.size,
            max: r.max,
        })
    }

    /// Counts an operation of `kind` on this collection.
    fn tally(&self, kind: &AtomicU64, n: u64, what: fn(&crate::stats::NamedOps) -> &AtomicU64) {
        let o = &self.db.engine().ops;
        kind.fetch_add(n, Ordering::Relaxed);
        what(&o.collection(&self.meta.name)).fetch_add(n, Ordering::Relaxed);
    }

    fn index(&self) -> Table {
        Table::handle(
            &self.db,
            &index_table(&self.meta.name),
            self.meta.index_root,
        )
    }

    /// Inserts `doc` (an ObjectId `_id` is added if it has none); returns
    /// its `_id`.
    pub fn insert_one(&self, doc: &Document) -> Result<Bson> {
        self.insert_one_with(doc, self.db.default_durability())
    }

    /// [`Collection::insert_one`] with a chosen durability.
    pub fn insert_one_with(&self, doc: &Document, durability: Durability) -> Result<Bson> {
        let (id, key, doc) = prepare(doc)?;
        self.db.write_docs(
            &[DocOp::Insert {
                coll: self.meta.clone(),
                key,
                doc,
            }],
            durability,
        )?;
        self.tally(&self.db.engine().ops.doc_inserts, 1, |o| &o.writes);
        Ok(id)
    }

    /// Inserts raw BSON bytes, checked first ([`Error::InvalidBson`]).
    pub fn insert_one_bson(&self, bytes: &[u8]) -> Result<Bson> {
        self.insert_one(&parse_document(bytes)?)
    }

    /// Inserts every document or none (one atomic batch); returns their
    /// `_id`s in order.
    pub fn insert_many<'a>(
        &self,
        docs: impl IntoIterator<Item = &'a Document>,
    ) -> Result<Vec<Bson>> {
        self.insert_many_with(docs, self.db.default_durability())
    }

    /// [`Collection::insert_many`] with a chosen durability.
    pub fn insert_many_with<'a>(
        &self,
        docs: impl IntoIterator<Item = &'a Document>,
        durability: Durability,
    ) -> Result<Vec<Bson>> {
        let mut ids = Vec::new();
        let mut ops = Vec::new();
        for d in docs {
            let (id, key, doc) = prepare(d)?;
            ids.push(id);
            ops.push(DocOp::Insert {
                coll: self.meta.clone(),
                key,
                doc,
            });
        }
        if !ops.is_empty() {
            self.db.write_docs(&ops, durability)?;
            let n = ops.len() as u64;
            self.tally(&self.db.engine().ops.doc_inserts, n, |o| &o.writes);
        }
        Ok(ids)
    }

    /// The document with `_id` equal to `id`, if any.
    pub fn find_one(&self, id: &Bson) -> Result<Option<Document>> {
        let key = idkey::key_of(id)?;
        self.tally(&self.db.engine().ops.doc_finds, 1, |o| &o.reads);
        let Some(v) = self.index().get(&key)? else {
            return Ok(None);
        };
        self.fetch(&v)
    }

    /// The document an index value points to (`None` if it went meanwhile).
    fn fetch(&self, v: &[u8]) -> Result<Option<Document>> {
        match &self.meta.ring {
            None => {
                let data = Table::handle(
                    &self.db,
                    &data_table(&self.meta.name),
                    self.meta.data_root.unwrap_or(0),
                );
                match data.get(v)? {
                    Some(bytes) => stored_document(&bytes, || {
                        format!("document in collection {:?}", self.meta.name)
                    })
                    .map(Some),
                    None => Ok(None),
                }
            }
            Some(ring) => {
                let (pos, rid) = ring_location(v)
                    .ok_or_else(|| Error::corruption(0, "capped index entry is malformed"))?;
                match ring.read(pos)? {
                    Slot::Record(h, doc) if h.rid == rid => stored_document(&doc, || {
                        format!("capped record {rid} of {:?}", self.meta.name)
                    })
                    .map(Some),
                    Slot::Damaged(why) => Err(Error::corruption(0, why)),
                    _ => Ok(None),
                }
            }
        }
    }

    /// Replaces the document with `_id` equal to `id` by `doc` (whose `_id`
    /// becomes `id`); whether one matched. A capped document keeps its
    /// size or the replace is refused.
    pub fn replace_one(&self, id: &Bson, doc: &Document) -> Result<bool> {
        let mut d = Document::new();
        d.insert("_id", id.clone());
        for (k, v) in doc {
            if k != "_id" {
                d.insert(k.clone(), v.clone());
            }
        }
        let (_, key, doc) = prepare(&d)?;
        self.tally(&self.db.engine().ops.doc_replaces, 1, |o| &o.writes);
        let m = self.db.write_docs(
            &[DocOp::Replace {
                coll: self.meta.clone(),
                key,
                doc,
            }],
            self.db.default_durability(),
        )?;
        Ok(m.first().copied().unwrap_or(false))
    }

    /// Deletes the document with `_id` equal to `id`; whether one matched.
    /// Refused on capped collections.
    pub fn delete_one(&self, id: &Bson) -> Result<bool> {
        let key = idkey::key_of(id)?;
        self.tally(&self.db.engine().ops.doc_deletes, 1, |o| &o.writes);
        let m = self.db.write_docs(
            &[DocOp::Remove {
                coll: self.meta.clone(),
                key,
            }],
            self.db.default_durability(),
        )?;
        Ok(m.first().copied().unwrap_or(false))
    }

    /// Every document in natural order (insertion order; for a capped
    /// collection also physical order).
    pub fn find(&self) -> Cursor {
        self.tally(&self.db.engine().ops.doc_finds, 1, |o| &o.scans);
        Cursor::natural(self.clone(), false)
    }

    /// Every document in reverse natural order.
    pub fn find_reverse(&self) -> Cursor {
        self.tally(&self.db.engine().ops.doc_finds, 1, |o| &o.scans);
        Cursor::natural(self.clone(), true)
    }

    /// Documents with `_id` in the range, in `_id` order.
    pub fn find_range(&self, lo: Bound<&Bson>, hi: Bound<&Bson>) -> Result<Cursor> {
        self.by_id(lo, hi, false)
    }

    /// Documents with `_id` in the range, in descending `_id` order.
    pub fn find_range_reverse(&self, lo: Bound<&Bson>, hi: Bound<&Bson>) -> Result<Cursor> {
        self.by_id(lo, hi, true)
    }

    fn by_id(&self, lo: Bound<&Bson>, hi: Bound<&Bson>, reverse: bool) -> Result<Cursor> {
        let range = encode_range(lo, hi)?;
        self.tally(&self.db.engine().ops.doc_finds, 1, |o| &o.scans);
        Ok(Cursor::by_id_in(
            self.clone(),
            self.index().range(range),
            reverse,
            None,
        ))
    }

    /// A tailable cursor over a capped collection, from its oldest record:
    /// at the end it waits up to `max_await` for new records.
    pub fn tail(&self, max_await: Duration) -> Result<Tailable> {
        Tailable::new(self.clone(), max_await)
    }

    /// Number of documents.
    pub fn count(&self) -> Result<u64> {
        match &self.meta.ring {
            Some(r) => Ok(r.state().count),
            None => {
                let mut n = 0;
                for kv in self.index().iter() {
                    kv?;
                    n += 1;
                }
                Ok(n)
            }
        }
    }

    /// Physical byte offset of every record of a capped collection, in
    /// natural order (seed 000's layout analysis runs on this).
    pub fn layout(&self) -> Result<Vec<u64>> {
        let Some(ring) = &self.meta.ring else {
            return Err(Error::NotCapped(self.meta.name.clone()));
        };
        let mut out = Vec::new();
        let mut c = cursor::RingWalk::new(ring, false);
        while let Some(r) = c.next_record(ring, &self.meta.name)? {
            out.push(ring.offset(r.0.pos));
        }
        Ok(out)
    }

    /// Checks every record and index entry; see [`ValidateReport`]. Run it
    /// without concurrent writers for exact counts.
    pub fn validate(&self) -> Result<ValidateReport> {
        cursor::validate(self)
    }

    pub(crate) fn ring(&self) -> Option<&Arc<Ring>> {
        self.meta.ring.as_ref()
    }

    pub(crate) fn data(&self) -> Option<Table> {
        self.meta
            .data_root
            .map(|r| Table::handle(&self.db, &data_table(&self.meta.name), r))
    }

    pub(crate) fn index_table(&self) -> Table {
        self.index()
    }

    pub(crate) fn fetch_indexed(&self, v: &[u8]) -> Result<Option<Document>> {
        self.fetch(v)
    }
}

/// A ring file prepared for a collection being created; removed when
/// dropped unless the creation renamed it into place.
struct PreparedRing<'a> {
    fs: &'a dyn crate::io::FileSystem,
    path: std::path::PathBuf,
}

impl Drop for PreparedRing<'_> {
    fn drop(&mut self) {
        // After a rename the name is gone: NotFound is the normal case,
        // and any other failure leaves a file the next open removes.
        let _ = self.fs.remove(&self.path);
    }
}
