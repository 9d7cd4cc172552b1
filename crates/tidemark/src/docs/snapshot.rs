//! Collections read through a snapshot ([`crate::ReadTxn::get_collection`]).
//!
//! A regular collection's documents and `_id` index are tables, so the
//! snapshot's versions give them as they were. A capped collection's
//! records live in its ring, which keeps no old versions; its `_id` index
//! is versioned, though, and decides what the snapshot sees: a record is
//! visible exactly when the snapshot's index maps its `_id` to it. Inserts
//! into one ring commit in record-id order, so the visible records are one
//! run of natural order: a forward walk ends at the first record the
//! snapshot cannot see, a reverse walk skips the newer ones first. A record
//! the snapshot can see but that inserts have since overwritten is
//! [`Error::CappedPositionLost`], never silently missing.

use std::ops::Bound;
use std::sync::Arc;

use bson::{Bson, Document};

use super::cursor::{Cursor, RingWalk};
use super::{data_table, idkey, index_table, ring_location, stored_document, Collection};
use crate::capped::Slot;
use crate::engine::COLLECTIONS;
use crate::error::{Error, Result};
use crate::txn::Snap;

/// A collection as of a snapshot; see [`crate::ReadTxn::get_collection`].
///
/// ```no_run
/// # let db = tidemark::Database::open("x")?;
/// let snap = db.begin_read();
/// let events = snap.get_collection("events")?;
/// let n = events.find()?.count();    // the same count however long it runs
/// # Ok::<(), tidemark::Error>(())
/// ```
pub struct SnapshotCollection {
    coll: Collection,
    snap: Arc<Snap>,
}

impl std::fmt::Debug for SnapshotCollection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotCollection")
            .field("name", &self.coll.name())
            .field("ts", &self.snap.reg.ts)
            .finish_non_exhaustive()
    }
}

impl SnapshotCollection {
    pub(crate) fn open(snap: Arc<Snap>, name: &str) -> Result<SnapshotCollection> {
        super::check_collection_name(name)?;
        let existed = match snap.get(COLLECTIONS, name.as_bytes()) {
            Ok(v) => v.is_some(),
            Err(Error::TableNotFound(_)) => false,
            Err(e) => return Err(e),
        };
        if !existed {
            return Err(Error::CollectionNotFound(name.to_string()));
        }
        // Tables dropped since the snapshot began refuse to be read.
        let missing = |e: Error| match e {
            Error::TableDropped(_) | Error::TableNotFound(_) => {
                Error::CollectionNotFound(name.to_string())
            }
            e => e,
        };
        snap.table(&index_table(name)).map_err(missing)?;
        let coll = snap.db.get_collection(name).map_err(missing)?;
        if coll.ring().is_none() {
            snap.table(&data_table(name)).map_err(missing)?;
        }
        Ok(SnapshotCollection { coll, snap })
    }

    /// The collection's name.
    pub fn name(&self) -> &str {
        self.coll.name()
    }

    /// The value the snapshot's `_id` index holds for `key`.
    fn indexed(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.snap.get(&index_table(self.coll.name()), key)
    }

    /// The document with `_id` equal to `id` as of the snapshot.
    pub fn find_one(&self, id: &Bson) -> Result<Option<Document>> {
        let key = idkey::key_of(id)?;
        match self.indexed(&key)? {
            Some(v) => self.fetch(&v).map(Some),
            None => Ok(None),
        }
    }

    /// The document a value of the snapshot's index points to.
    pub(crate) fn fetch(&self, v: &[u8]) -> Result<Document> {
        let name = self.coll.name();
        match self.coll.ring() {
            None => match self.snap.get(&data_table(name), v)? {
                Some(bytes) => {
                    stored_document(&bytes, || format!("document in collection {name:?}"))
                }
                None => Err(Error::corruption(
                    0,
                    format!("collection {name:?}: _id index names a missing document"),
                )),
            },
            Some(ring) => {
                let (pos, rid) = ring_location(v)
                    .ok_or_else(|| Error::corruption(0, "capped index entry is malformed"))?;
                let first = ring.state().first_id;
                match ring.read(pos)? {
                    Slot::Record(h, doc) if h.rid == rid => {
                        stored_document(&doc, || format!("capped record {rid} of {name:?}"))
                    }
                    _ if rid < first => Err(Error::CappedPositionLost {
                        collection: name.to_string(),
                        rid,
                    }),
                    Slot::Damaged(why) => Err(Error::corruption(0, why)),
                    _ => Err(Error::corruption(
                        0,
                        format!(
                            "capped collection {name:?}: record {rid} is not where its index says"
                        ),
                    )),
                }
            }
        }
    }

    /// Every document the snapshot sees, in natural order.
    pub fn find(&self) -> Result<Cursor> {
        self.natural(false)
    }

    /// Every document the snapshot sees, in reverse natural order.
    pub fn find_reverse(&self) -> Result<Cursor> {
        self.natural(true)
    }

    fn natural(&self, reverse: bool) -> Result<Cursor> {
        let name = self.coll.name();
        match self.coll.ring() {
            None => {
                let data = self.snap.table(&data_table(name))?;
                let range = data.range_in::<&[u8], _>(.., Some(self.snap.clone()));
                Ok(Cursor::table(self.coll.clone(), range, reverse))
            }
            Some(ring) => {
                let walk = RingWalk::new(ring, reverse);
                self.check_not_lost()?;
                Ok(Cursor::snapshot_ring(
                    self.coll.clone(),
                    self.snap.clone(),
                    walk,
                    reverse,
                ))
            }
        }
    }

    /// [`Error::CappedPositionLost`] if the snapshot sees a capped record
    /// that inserts have removed since it began: the removal's index
    /// delete left a version behind for the snapshot.
    fn check_not_lost(&self) -> Result<()> {
        let Some(ring) = self.coll.ring() else {
            return Ok(());
        };
        let first = ring.state().first_id;
        let index = index_table(self.coll.name());
        let e = self.snap.db.engine();
        let seen = e.versions.range(
            self.snap.reg.ts,
            index.as_bytes(),
            Bound::Unbounded,
            Bound::Unbounded,
        );
        self.snap.check()?;
        let lost = seen
            .iter()
            .filter_map(|(_, v)| v.as_deref().and_then(ring_location))
            .map(|(_, rid)| rid)
            .filter(|&rid| rid < first)
            .min();
        match lost {
            Some(rid) => Err(Error::CappedPositionLost {
                collection: self.coll.name().to_string(),
                rid,
            }),
            None => Ok(()),
        }
    }

    /// Documents with `_id` in the range as of the snapshot, in `_id` order.
    pub fn find_range(&self, lo: Bound<&Bson>, hi: Bound<&Bson>) -> Result<Cursor> {
        self.by_id(lo, hi, false)
    }

    /// Documents with `_id` in the range as of the snapshot, in descending
    /// `_id` order.
    pub fn find_range_reverse(&self, lo: Bound<&Bson>, hi: Bound<&Bson>) -> Result<Cursor> {
        self.by_id(lo, hi, true)
    }

    fn by_id(&self, lo: Bound<&Bson>, hi: Bound<&Bson>, reverse: bool) -> Result<Cursor> {
        let range = super::encode_range(lo, hi)?;
        let index = self.snap.table(&index_table(self.coll.name()))?;
        let r = index.range_in(range, Some(self.snap.clone()));
        Ok(Cursor::by_id_in(
            self.coll.clone(),
            r,
            reverse,
            Some(self.snap.clone()),
        ))
    }

    /// Number of documents the snapshot sees.
    pub fn count(&self) -> Result<u64> {
        let index = self.snap.table(&index_table(self.coll.name()))?;
        let mut n = 0;
        for kv in index.range_in::<&[u8], _>(.., Some(self.snap.clone())) {
            kv?;
            n += 1;
        }
        Ok(n)
    }

    /// Whether a capped record (its `_id` key, position and id) is one the
    /// snapshot sees.
    pub(crate) fn sees(&self, key: &[u8], pos: u64, rid: u64) -> Result<bool> {
        Ok(self.indexed(key)?.as_deref().and_then(ring_location) == Some((pos, rid)))
    }

    pub(crate) fn from_parts(coll: Collection, snap: Arc<Snap>) -> SnapshotCollection {
        SnapshotCollection { coll, snap }
    }
}
