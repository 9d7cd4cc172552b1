//! `verify`: walks every table and reports what is wrong, without panicking.

use std::collections::HashSet;

use crate::btree::node::{self, LeafValue};
use crate::btree::overflow;
use crate::engine::Engine;
use crate::error::Result;
use crate::page;

/// Result of [`crate::Database::verify`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Tables checked, catalog included.
    pub tables: u64,
    /// Tree pages visited.
    pub pages: u64,
    /// Overflow pages visited.
    pub overflow_pages: u64,
    /// Key/value entries seen.
    pub entries: u64,
    /// Everything found wrong; empty means the database is consistent.
    pub problems: Vec<String>,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

const MAX_DEPTH: usize = 32;

struct Walk<'a> {
    e: &'a Engine,
    seen: HashSet<u64>,
    report: VerifyReport,
    table: String,
}

pub(crate) fn verify(e: &Engine, tables: &[(String, u64)]) -> VerifyReport {
    let mut w = Walk {
        e,
        seen: HashSet::new(),
        report: VerifyReport::default(),
        table: String::new(),
    };
    // The walk reads each child's id from a copy of its parent and latches
    // the child after letting the parent go, so no page may be freed or
    // split meanwhile: commits wait at the write gate while it runs (a
    // merge, an unlink or a split happens only inside a commit). Reads go
    // on.
    e.gate.close();
    for (name, root) in tables {
        w.table = name.clone();
        w.report.tables += 1;
        w.node(*root, None, None, None, 0);
    }
    e.gate.open();
    w.report
}

impl Walk<'_> {
    fn problem(&mut self, pid: u64, what: impl std::fmt::Display) {
        let t = self.table.clone();
        self.report
            .problems
            .push(format!("table {t}: page {pid}: {what}"));
    }

    /// Checks the subtree at `pid`: keys within [lo, hi), level as expected.
    fn node(
        &mut self,
        pid: u64,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        level: Option<u8>,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            return self.problem(pid, "deeper than the depth limit");
        }
        if !self.seen.insert(pid) {
            return self.problem(pid, "referenced twice");
        }
        let bytes = match self.e.pool.fix_shared(&self.e.pager, pid) {
            Ok(g) => g.bytes().to_vec(),
            Err(err) => return self.problem(pid, err),
        };
        self.report.pages += 1;
        let b = &bytes[..];
        if let Some(l) = level {
            if page::level(b) != l {
                self.problem(
                    pid,
                    format!("level {} where {l} was expected", page::level(b)),
                );
            }
        }
        let n = page::count(b);
        let mut prev: Option<&[u8]> = lo;
        for i in 0..n {
            let k = node::key(b, i);
            let ordered = match prev {
                Some(p) if i == 0 && lo.is_some() => k >= p,
                Some(p) => k > p,
                None => true,
            };
            if !ordered {
                self.problem(pid, format!("key {i} out of order"));
            }
            if hi.is_some_and(|h| k >= h) {
                self.problem(
                    pid,
                    format!("key {i} at or above the parent's upper separator"),
                );
            }
            prev = Some(k);
        }
        if node::is_leaf(b) {
            self.report.entries += n as u64;
            for i in 0..n {
                if let LeafValue::Overflow { len, index_pid } = node::leaf_value(b, i) {
                    if let Err(err) = self.overflow(index_pid, len) {
                        self.problem(pid, format!("value {i}: {err}"));
                    }
                }
            }
            return;
        }
        let lvl = page::level(b).saturating_sub(1);
        for i in 0..=n {
            let clo = if i == 0 {
                lo
            } else {
                Some(node::key(b, i - 1))
            };
            let chi = if i == n { hi } else { Some(node::key(b, i)) };
            self.node(node::child(b, i), clo, chi, Some(lvl), depth + 1);
        }
    }

    fn overflow(&mut self, index_pid: u64, len: u64) -> Result<()> {
        // Reading the whole value checks every page's checksum and length.
        overflow::read(&self.e.pager, index_pid, len)?;
        for p in overflow::pages(&self.e.pager, index_pid, len)? {
            if !self.seen.insert(p) {
                self.problem(p, "overflow page referenced twice");
            }
            self.report.overflow_pages += 1;
        }
        Ok(())
    }
}
