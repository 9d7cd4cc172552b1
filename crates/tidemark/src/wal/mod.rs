//! The write-ahead log (in progress: framing only so far).
//!
//! Design, as it will be built (see ARCHITECTURE.md when it lands):
//!
//! * **Stream.** One logical byte stream addressed by LSN, cut into
//!   fixed-size, preallocated segment files in the database directory. A
//!   record never straddles two segments: the last record of a segment is
//!   followed by a pad record up to its end. A segment the last durable
//!   checkpoint no longer needs is renamed to a future position and
//!   overwritten in place, so steady-state commits never grow a file.
//! * **Order.** A batch takes striped locks on the keys it writes, then
//!   reserves its log space (an atomic add), applies itself to the tree and
//!   releases the stripes: two batches writing one key reserve in the order
//!   they apply. The reservation happens inside the write gate, so a
//!   checkpoint cut is also a point in the log.
//! * **Group commit.** Committers reserve space in a shared slot with one
//!   atomic operation, copy their records in parallel, and the one that
//!   closes the slot writes it and fsyncs it for all of them; waiters are
//!   woken directly.
//! * **Recovery.** Replay from the checkpoint's LSN to the first record that
//!   does not check. Each record carries the position already durable when
//!   it was written; a later valid record whose durable position lies past
//!   a bad one proves the bad one was synced, which is corruption, not a
//!   torn tail.

pub(crate) mod record;
