//! Request distributions of the YCSB core workloads, written from their
//! definitions: uniform, zipfian (Gray et al., "Quickly generating
//! billion-record synthetic databases", SIGMOD 1994, with YCSB's constant
//! 0.99 and its scrambling by an FNV hash so popular keys are spread over
//! the key space), and latest (zipfian over recency: the newest record is
//! the most popular).

use rand::Rng;

/// YCSB's zipfian constant.
pub const THETA: f64 = 0.99;
/// The item space of the scrambled zipfian (YCSB draws from ten billion
/// items and folds them onto the key count with a hash).
const SCRAMBLE_ITEMS: u64 = 10_000_000_000;

/// FNV-1a over the 8 bytes of `v`, least significant first (YCSB's
/// `fnvhash64`).
pub fn fnv64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
        v >>= 8;
    }
    h
}

/// The key of record number `n`: "user" and a hash of n, so inserts in
/// record order land all over the key space (YCSB's default hashed order).
pub fn key(n: u64) -> Vec<u8> {
    format!("user{}", fnv64(n)).into_bytes()
}

/// zeta(n, theta) = sum of 1/i^theta for i in 1..=n. Summed exactly up to
/// a few thousand terms, the rest by Euler-Maclaurin (error far below
/// 1e-9 at these sizes), so ten billion items cost nothing.
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 4096;
    if n <= EXACT {
        return (1..=n).map(|i| (i as f64).powf(-theta)).sum();
    }
    let m = EXACT as f64;
    let nf = n as f64;
    let head: f64 = (1..EXACT).map(|i| (i as f64).powf(-theta)).sum();
    let integral = (nf.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta);
    let ends = (m.powf(-theta) + nf.powf(-theta)) / 2.0;
    let d1 = theta / 12.0 * (m.powf(-theta - 1.0) - nf.powf(-theta - 1.0));
    head + integral + ends + d1
}

/// Zipfian over `0..items`, item 0 the most popular. The item count may
/// grow (for the latest distribution); zeta is extended incrementally.
#[derive(Clone)]
pub struct Zipfian {
    items: u64,
    zetan: f64,
    zeta2: f64,
    alpha: f64,
    eta: f64,
}

impl Zipfian {
    pub fn new(items: u64) -> Self {
        Self::with_zeta(items, zeta(items, THETA))
    }
    fn with_zeta(items: u64, zetan: f64) -> Self {
        let zeta2 = zeta(2, THETA);
        let mut z = Zipfian {
            items,
            zetan,
            zeta2,
            alpha: 1.0 / (1.0 - THETA),
            eta: 0.0,
        };
        z.eta = z.eta_for();
        z
    }
    fn eta_for(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - THETA)) / (1.0 - self.zeta2 / self.zetan)
    }
    /// Grows the item count to `items` (never shrinks).
    pub fn grow(&mut self, items: u64) {
        if items <= self.items {
            return;
        }
        if items - self.items > 1_000_000 {
            self.zetan = zeta(items, THETA);
        } else {
            self.zetan += (self.items + 1..=items)
                .map(|i| (i as f64).powf(-THETA))
                .sum::<f64>();
        }
        self.items = items;
        self.eta = self.eta_for();
    }
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(THETA) {
            return 1.min(self.items - 1);
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }
}

/// Which record a request goes to.
#[derive(Clone)]
pub enum Chooser {
    Uniform,
    /// Scrambled zipfian over a fixed space: YCSB sizes it for the records
    /// plus the inserts the run expects, and skips numbers not yet inserted.
    Zipfian {
        z: Zipfian,
        space: u64,
    },
    /// The newest records most popular.
    Latest {
        z: Zipfian,
    },
}

impl Chooser {
    pub fn zipfian(space: u64) -> Self {
        Chooser::Zipfian {
            z: Zipfian::with_zeta(SCRAMBLE_ITEMS, zeta(SCRAMBLE_ITEMS, THETA)),
            space: space.max(1),
        }
    }
    pub fn latest(records: u64) -> Self {
        Chooser::Latest {
            z: Zipfian::new(records.max(1)),
        }
    }
    /// A record number below `inserted` (the records acknowledged so far).
    pub fn next(&mut self, rng: &mut impl Rng, inserted: u64) -> u64 {
        let inserted = inserted.max(1);
        match self {
            Chooser::Uniform => rng.gen_range(0..inserted),
            Chooser::Zipfian { z, space } => loop {
                let n = fnv64(z.next(rng)) % *space;
                if n < inserted {
                    return n;
                }
            },
            Chooser::Latest { z } => {
                z.grow(inserted);
                inserted - 1 - z.next(rng)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zeta_matches_the_exact_sum() {
        let exact: f64 = (1..=100_000u64).map(|i| (i as f64).powf(-THETA)).sum();
        assert!(
            (zeta(100_000, THETA) - exact).abs() < 1e-9,
            "{}",
            zeta(100_000, THETA)
        );
        // YCSB's precomputed zeta of its ten-billion item space.
        assert!((zeta(SCRAMBLE_ITEMS, THETA) - 26.469_028_201_783_02).abs() < 1e-6);
    }

    #[test]
    fn zipfian_is_skewed_like_zipf() {
        let z = Zipfian::new(1000);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut counts = vec![0u32; 1000];
        for _ in 0..200_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        // P(0)/P(1) = 2^theta; P(0) = 1/zeta(1000).
        let p0 = counts[0] as f64 / 200_000.0;
        assert!((p0 - 1.0 / zeta(1000, THETA)).abs() < 0.01, "{p0}");
        let r = counts[0] as f64 / counts[1] as f64;
        assert!((r - 2f64.powf(THETA)).abs() < 0.1, "{r}");
        assert!(counts[999] < counts[10]);
    }

    #[test]
    fn grown_zipfian_equals_a_fresh_one() {
        let mut g = Zipfian::new(500);
        g.grow(20_000);
        let f = Zipfian::new(20_000);
        assert!((g.zetan - f.zetan).abs() < 1e-9);
        assert!((g.eta - f.eta).abs() < 1e-12);
    }

    #[test]
    fn choosers_stay_below_the_inserted_count() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        for mut c in [
            Chooser::Uniform,
            Chooser::zipfian(2000),
            Chooser::latest(1000),
        ] {
            for i in 0..10_000u64 {
                let inserted = 1000 + i / 10;
                assert!(c.next(&mut rng, inserted) < inserted);
            }
        }
        // Latest: the newest record is the most requested.
        let mut c = Chooser::latest(1000);
        let hits = (0..10_000)
            .filter(|_| c.next(&mut rng, 1000) == 999)
            .count();
        assert!(hits > 1000, "{hits}");
    }
}
