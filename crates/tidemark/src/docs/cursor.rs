//! Cursors over collections: natural order (forward and reverse), `_id`
//! ranges, tailable cursors over capped collections, and `validate`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;

use super::{
    idkey, ring_location, stored_document, Collection, SnapshotCollection, ValidateReport,
};
use crate::capped::{fragmentation_ratio, RecordHead, Ring, Slot};
use crate::db::Range;
use crate::error::{Error, Result};
use crate::txn::Snap;

/// A walk over a ring's records in natural order (or reverse), from the
/// state when it began.
pub(crate) struct RingWalk {
    pos: u64,
    rid: u64,
    /// Forward: first id not to read; reverse: lowest id to read.
    end: u64,
    reverse: bool,
}

impl RingWalk {
    pub(crate) fn new(ring: &Ring, reverse: bool) -> RingWalk {
        let st = ring.state();
        if reverse {
            RingWalk {
                pos: st.last,
                rid: st.next_id - 1,
                end: st.first_id,
                reverse,
            }
        } else {
            RingWalk {
                pos: st.tail,
                rid: st.first_id,
                end: st.next_id,
                reverse,
            }
        }
    }

    /// The next record, or `None` at the end. A record overwritten since
    /// the walk began is [`Error::CappedPositionLost`].
    pub(crate) fn next_record(
        &mut self,
        ring: &Ring,
        name: &str,
    ) -> Result<Option<(RecordHead, Vec<u8>)>> {
        let done = if self.reverse {
            self.rid < self.end || self.rid == 0
        } else {
            self.rid >= self.end
        };
        if done {
            return Ok(None);
        }
        let (h, doc) = read_expected(ring, name, self.pos, self.rid)?;
        if self.reverse {
            self.rid -= 1;
            self.pos = h.prev;
        } else {
            self.rid += 1;
            if self.rid < self.end {
                self.pos = ring.next_pos(self.pos, h.total())?;
            }
        }
        Ok(Some((h, doc)))
    }
}

/// Reads record `rid`, expected at `pos`.
fn read_expected(ring: &Ring, name: &str, pos: u64, rid: u64) -> Result<(RecordHead, Vec<u8>)> {
    let found = ring.read(pos)?;
    if let Slot::Record(h, doc) = found {
        if h.rid == rid {
            return Ok((h, doc));
        }
    } else if let Slot::Damaged(why) = found {
        if rid >= ring.state().first_id {
            return Err(Error::corruption(0, why));
        }
    }
    if rid < ring.state().first_id {
        return Err(Error::CappedPositionLost {
            collection: name.to_string(),
            rid,
        });
    }
    Err(Error::corruption(
        0,
        format!(
            "capped collection {name:?}: record {rid} is not at ring offset {}",
            ring.offset(pos)
        ),
    ))
}

enum Source {
    Table(Range, bool),
    Ring(RingWalk),
    /// `_id` order (`bool`: descending), read live or through a snapshot.
    Index(Range, bool, Option<SnapshotCollection>),
    /// Natural order of a ring as a snapshot sees it.
    SnapRing {
        walk: RingWalk,
        view: SnapshotCollection,
        reverse: bool,
        /// A visible record was returned (reverse: the newer records the
        /// snapshot cannot see are behind).
        seen: bool,
    },
}

/// An iterator over documents; see [`Collection::find`].
pub struct Cursor {
    coll: Collection,
    src: Source,
    failed: bool,
}

impl Cursor {
    pub(crate) fn natural(coll: Collection, reverse: bool) -> Cursor {
        let src = match (coll.ring(), coll.data()) {
            (Some(r), _) => Source::Ring(RingWalk::new(r, reverse)),
            (None, Some(t)) => Source::Table(t.iter(), reverse),
            (None, None) => Source::Index(coll.index_table().iter(), reverse, None),
        };
        Cursor {
            coll,
            src,
            failed: false,
        }
    }

    pub(crate) fn table(coll: Collection, range: Range, reverse: bool) -> Cursor {
        Cursor {
            coll,
            src: Source::Table(range, reverse),
            failed: false,
        }
    }

    pub(crate) fn by_id_in(
        coll: Collection,
        range: Range,
        reverse: bool,
        snap: Option<Arc<Snap>>,
    ) -> Cursor {
        let view = snap.map(|s| SnapshotCollection::from_parts(coll.clone(), s));
        Cursor {
            coll,
            src: Source::Index(range, reverse, view),
            failed: false,
        }
    }

    pub(crate) fn snapshot_ring(
        coll: Collection,
        snap: Arc<Snap>,
        walk: RingWalk,
        reverse: bool,
    ) -> Cursor {
        let view = SnapshotCollection::from_parts(coll.clone(), snap);
        Cursor {
            coll,
            src: Source::SnapRing {
                walk,
                view,
                reverse,
                seen: false,
            },
            failed: false,
        }
    }

    fn step(&mut self) -> Result<Option<Document>> {
        let name = self.coll.name().to_string();
        match &mut self.src {
            Source::Table(r, reverse) => match if *reverse { r.next_back() } else { r.next() } {
                None => Ok(None),
                Some(kv) => {
                    let (_, v) = kv?;
                    stored_document(&v, || format!("document in collection {name:?}")).map(Some)
                }
            },
            Source::Ring(w) => {
                let Some(ring) = self.coll.ring().cloned() else {
                    return Ok(None);
                };
                match w.next_record(&ring, &name)? {
                    None => Ok(None),
                    Some((h, doc)) => {
                        stored_document(&doc, || format!("capped record {} of {name:?}", h.rid))
                            .map(Some)
                    }
                }
            }
            Source::SnapRing {
                walk,
                view,
                reverse,
                seen,
            } => {
                let Some(ring) = self.coll.ring().cloned() else {
                    return Ok(None);
                };
                loop {
                    let Some((h, doc)) = walk.next_record(&ring, &name)? else {
                        return Ok(None);
                    };
                    if view.sees(&h.key, h.pos, h.rid)? {
                        *seen = true;
                        return stored_document(&doc, || {
                            format!("capped record {} of {name:?}", h.rid)
                        })
                        .map(Some);
                    }
                    // Records commit in id order: forward, the first one
                    // the snapshot cannot see starts the newer ones;
                    // reverse, those come first and are skipped.
                    if !*reverse || *seen {
                        return Ok(None);
                    }
                }
            }
            Source::Index(r, reverse, view) => loop {
                let next = if *reverse { r.next_back() } else { r.next() };
                match next {
                    None => return Ok(None),
                    Some(kv) => {
                        let (_, v) = kv?;
                        if let Some(view) = view {
                            return view.fetch(&v).map(Some);
                        }
                        // An entry whose document went meanwhile is skipped.
                        if let Some(d) = self.coll.fetch_indexed(&v)? {
                            return Ok(Some(d));
                        }
                    }
                }
            },
        }
    }
}

impl Iterator for Cursor {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(Some(d)) => Some(Ok(d)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// A tailable cursor over a capped collection: reads in natural order from
/// the oldest record and, at the end, waits for new records (up to its
/// `max_await` per call) instead of ending. If it falls so far behind that
/// the records it would read next were overwritten, it reports
/// [`Error::CappedPositionLost`].
pub struct Tailable {
    coll: Collection,
    max_await: Duration,
    next_rid: u64,
    /// Position and size of the last record read.
    last: Option<(u64, u64)>,
}

impl Tailable {
    pub(crate) fn new(coll: Collection, max_await: Duration) -> Result<Tailable> {
        let Some(ring) = coll.ring() else {
            return Err(Error::NotCapped(coll.name().to_string()));
        };
        let next_rid = ring.state().first_id;
        Ok(Tailable {
            coll,
            max_await,
            next_rid,
            last: None,
        })
    }

    /// The next document; `None` if none arrived within `max_await`.
    pub fn next_document(&mut self) -> Result<Option<Document>> {
        let Some(ring) = self.coll.ring().cloned() else {
            return Ok(None);
        };
        let name = self.coll.name().to_string();
        let deadline = Instant::now() + self.max_await;
        loop {
            let seen = ring.arrivals();
            let st = ring.state();
            if self.next_rid < st.first_id {
                return Err(Error::CappedPositionLost {
                    collection: name,
                    rid: self.next_rid,
                });
            }
            if self.next_rid < st.next_id {
                let pos = match self.last {
                    Some((p, total)) => ring.next_pos(p, total)?,
                    None if self.next_rid == st.first_id => st.tail,
                    None => {
                        return Err(Error::CappedPositionLost {
                            collection: name,
                            rid: self.next_rid,
                        })
                    }
                };
                let (h, doc) = read_expected(&ring, &name, pos, self.next_rid)?;
                self.last = Some((pos, h.total()));
                self.next_rid += 1;
                let rid = h.rid;
                return stored_document(&doc, || format!("capped record {rid} of {name:?}"))
                    .map(Some);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            ring.wait_arrival(seen, deadline - now);
        }
    }
}

impl Iterator for Tailable {
    type Item = Result<Document>;

    /// Ends when nothing arrives within `max_await`; calling again resumes.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_document().transpose()
    }
}

pub(crate) fn validate(coll: &Collection) -> Result<ValidateReport> {
    let mut problems = Vec::new();
    let mut index_entries = 0u64;
    for kv in coll.index_table().iter() {
        kv?;
        index_entries += 1;
    }
    let name = coll.name().to_string();
    let mut r = ValidateReport {
        count: 0,
        data_bytes: 0,
        wasted_bytes: 0,
        ring_size: None,
        fragmentation: None,
        discontinuities: None,
        wraps: None,
        index_entries,
        problems: Vec::new(),
    };
    let index = coll.index_table();
    let key_of_doc = |doc: &Document| -> Result<Vec<u8>> {
        idkey::key_of(
            doc.get("_id")
                .ok_or_else(|| Error::InvalidBson("document without _id".into()))?,
        )
    };
    match (coll.ring(), coll.data()) {
        (Some(ring), _) => {
            let st = ring.state();
            let mut offsets = Vec::new();
            let (mut jumps, mut wraps) = (0u64, 0u64);
            let mut prev_end: Option<u64> = None;
            let mut w = RingWalk::new(ring, false);
            loop {
                match w.next_record(ring, &name) {
                    Ok(None) => break,
                    Ok(Some((h, doc))) => {
                        r.count += 1;
                        r.data_bytes += h.total();
                        offsets.push(ring.offset(h.pos));
                        if let Some(end) = prev_end {
                            if h.pos != end {
                                if ring.offset(h.pos) == 0
                                    && h.pos == end.next_multiple_of(ring.size)
                                {
                                    wraps += 1;
                                } else {
                                    jumps += 1;
                                }
                            }
                        }
                        prev_end = Some(h.pos + h.total());
                        match stored_document(&doc, || format!("record {}", h.rid))
                            .and_then(|d| key_of_doc(&d))
                        {
                            Ok(k) if k == h.key => {}
                            Ok(_) => problems.push(format!("record {}: key is not its _id", h.rid)),
                            Err(e) => problems.push(format!("record {}: {e}", h.rid)),
                        }
                        match index.get(&h.key)?.as_deref().and_then(ring_location) {
                            Some((pos, rid)) if pos == h.pos && rid == h.rid => {}
                            _ => problems
                                .push(format!("record {}: _id index does not point to it", h.rid)),
                        }
                    }
                    Err(e) => {
                        problems.push(format!("ring walk stopped: {e}"));
                        break;
                    }
                }
            }
            if r.count != st.count || r.data_bytes != st.bytes {
                problems.push(format!(
                    "ring state says {} records of {} bytes; found {} of {}",
                    st.count, st.bytes, r.count, r.data_bytes
                ));
            }
            if index_entries != r.count {
                problems.push(format!(
                    "_id index has {index_entries} entries for {} records",
                    r.count
                ));
            }
            r.wasted_bytes = (st.head - st.tail).saturating_sub(st.bytes);
            r.ring_size = Some(ring.size);
            r.fragmentation = Some(fragmentation_ratio(&offsets));
            r.discontinuities = Some(jumps);
            r.wraps = Some(wraps);
            if wraps > 1 {
                problems.push(format!("{wraps} wraps within the live records"));
            }
        }
        (None, Some(data)) => {
            for kv in data.iter() {
                let (rid, v) = kv?;
                r.count += 1;
                r.data_bytes += v.len() as u64;
                match stored_document(&v, || "document".into()).and_then(|d| key_of_doc(&d)) {
                    Ok(k) => {
                        if index.get(&k)?.as_deref() != Some(&rid[..]) {
                            problems
                                .push(format!("document {rid:?}: _id index does not point to it"));
                        }
                    }
                    Err(e) => problems.push(format!("document {rid:?}: {e}")),
                }
            }
            if index_entries != r.count {
                problems.push(format!(
                    "_id index has {index_entries} entries for {} documents",
                    r.count
                ));
            }
        }
        (None, None) => problems.push("collection has neither data table nor ring".into()),
    }
    r.problems = problems;
    Ok(r)
}
