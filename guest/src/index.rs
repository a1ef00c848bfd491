//! Vector search over slots: an exact scan of a flat, contiguous buffer (one cache-friendly pass
//! that the compiler vectorises with simd128).

/// Vectors by slot; a removed slot is zeroed and skipped.
#[derive(Debug)]
pub struct VectorIndex {
    dim: usize,
    data: Vec<f32>,
    live: Vec<bool>,
}

impl VectorIndex {
    pub fn new(dim: usize) -> Self {
        VectorIndex { dim, data: Vec::new(), live: Vec::new() }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn insert(&mut self, slot: u32, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dim);
        let slot = slot as usize;
        if self.live.len() <= slot {
            self.live.resize(slot + 1, false);
            self.data.resize((slot + 1) * self.dim, 0.0);
        }
        self.data[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(vector);
        self.live[slot] = true;
    }

    pub fn remove(&mut self, slot: u32) {
        let slot = slot as usize;
        if slot < self.live.len() {
            self.live[slot] = false;
            self.data[slot * self.dim..(slot + 1) * self.dim].fill(0.0);
        }
    }

    pub fn get(&self, slot: u32) -> Option<&[f32]> {
        let slot = slot as usize;
        (slot < self.live.len() && self.live[slot])
            .then(|| &self.data[slot * self.dim..(slot + 1) * self.dim])
    }

    /// The `limit` eligible slots most similar to `query` (dot product of unit vectors = cosine).
    pub fn search(&self, query: &[f32], limit: usize, eligible: impl Fn(u32) -> bool) -> Vec<(u32, f32)> {
        let mut top = TopK::new(limit);
        for (slot, row) in self.data.chunks_exact(self.dim).enumerate() {
            if self.live[slot] && eligible(slot as u32) {
                top.push(slot as u32, dot(query, row));
            }
        }
        top.into_sorted()
    }
}

#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent accumulators let the compiler keep two simd128 lanes busy.
    let mut acc = [0f32; 8];
    let chunks = a.len() / 8;
    for i in 0..chunks {
        let (x, y) = (&a[i * 8..i * 8 + 8], &b[i * 8..i * 8 + 8]);
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for i in chunks * 8..a.len() {
        sum += a[i] * b[i];
    }
    sum
}

/// Keeps the best `k` (slot, score) pairs seen.
pub struct TopK {
    k: usize,
    items: Vec<(u32, f32)>,
    floor: f32,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        TopK { k, items: Vec::with_capacity(k * 2 + 1), floor: f32::NEG_INFINITY }
    }

    #[inline]
    pub fn push(&mut self, slot: u32, score: f32) {
        if self.k == 0 || score < self.floor {
            return;
        }
        self.items.push((slot, score));
        if self.items.len() >= self.k * 2 {
            self.shrink();
        }
    }

    fn shrink(&mut self) {
        self.items.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        self.items.truncate(self.k);
        if self.items.len() == self.k {
            self.floor = self.items[self.k - 1].1;
        }
    }

    pub fn into_sorted(mut self) -> Vec<(u32, f32)> {
        self.shrink();
        self.items
    }
}

/// Pairs of vectors (by slot) whose cosine exceeds `threshold`, each pair once, unordered.
/// Small sets are compared exhaustively; larger ones through random-hyperplane LSH (16 tables
/// of 10-bit sign codes, seeded, so runs are repeatable): a pair at cosine 0.95 shares a bucket
/// in at least one table with probability ≈ 0.999, and only bucket mates are compared, so
/// 10,000 vectors cost about 160 projections each instead of 10,000 dot products.
pub fn near_duplicate_pairs(vectors: &[(u32, &[f32])], threshold: f32) -> Vec<(u32, u32, f32)> {
    const EXHAUSTIVE_BELOW: usize = 2000;
    const TABLES: usize = 16;
    const BITS: usize = 10;
    /// Within one bucket, each vector is compared with this many before it (bounds the cost
    /// when very many vectors are alike; duplicates then chain through their neighbours).
    const PER_BUCKET: usize = 32;
    let mut out = Vec::new();
    let check = |i: usize, j: usize, out: &mut Vec<(u32, u32, f32)>| {
        let cosine = dot(vectors[i].1, vectors[j].1);
        if cosine > threshold {
            let (a, b) = (vectors[i].0.min(vectors[j].0), vectors[i].0.max(vectors[j].0));
            out.push((a, b, cosine));
        }
    };
    if vectors.len() < EXHAUSTIVE_BELOW {
        for i in 0..vectors.len() {
            for j in 0..i {
                check(i, j, &mut out);
            }
        }
        return out;
    }
    let dim = vectors[0].1.len();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut uniform = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    // Sums of four uniforms: close enough to Gaussian for direction-free hyperplanes.
    let planes: Vec<f32> =
        (0..TABLES * BITS * dim).map(|_| uniform() + uniform() + uniform() + uniform() - 2.0).collect();
    let mut buckets: std::collections::HashMap<(usize, u16), Vec<usize>> = std::collections::HashMap::new();
    for (i, (_, v)) in vectors.iter().enumerate() {
        for t in 0..TABLES {
            let mut code = 0u16;
            for b in 0..BITS {
                let plane = &planes[(t * BITS + b) * dim..(t * BITS + b + 1) * dim];
                code = (code << 1) | u16::from(dot(v, plane) >= 0.0);
            }
            buckets.entry((t, code)).or_default().push(i);
        }
    }
    let mut seen: std::collections::HashSet<(usize, usize)> = std::collections::HashSet::new();
    let mut keys: Vec<&(usize, u16)> = buckets.keys().collect();
    keys.sort();
    for key in keys {
        let members = &buckets[key];
        for (n, &i) in members.iter().enumerate() {
            for &j in &members[n.saturating_sub(PER_BUCKET)..n] {
                if seen.insert((i.min(j), i.max(j))) {
                    check(i, j, &mut out);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_search_ranks_by_cosine_and_skips_removed() {
        let mut index = VectorIndex::new(3);
        index.insert(0, &[1.0, 0.0, 0.0]);
        index.insert(1, &[0.6, 0.8, 0.0]);
        index.insert(2, &[0.0, 0.0, 1.0]);
        let hits = index.search(&[1.0, 0.0, 0.0], 2, |_| true);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![0, 1]);
        index.remove(0);
        let hits = index.search(&[1.0, 0.0, 0.0], 2, |_| true);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1, 2]);
        let hits = index.search(&[1.0, 0.0, 0.0], 5, |s| s != 1);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }

    #[test]
    fn near_duplicates_are_found_exhaustively_and_by_lsh() {
        // Unit vectors in 32 dimensions from a fixed sequence; every 100th has a near twin.
        let dim = 32;
        let mut x = 7u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let mut data: Vec<Vec<f32>> = Vec::new();
        for i in 0..3000 {
            let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
            if i % 100 == 1 {
                v = data[i - 1].iter().map(|a| a + 0.02 * next()).collect();
            }
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
            data.push(v.iter().map(|a| a / norm).collect());
        }
        let all: Vec<(u32, &[f32])> =
            data.iter().enumerate().map(|(i, v)| (i as u32, v.as_slice())).collect();
        let mut lsh = near_duplicate_pairs(&all, 0.95);
        lsh.sort_by_key(|p| (p.0, p.1));
        let expected: Vec<(u32, u32)> = (0..30).map(|k| (k * 100, k * 100 + 1)).collect();
        assert_eq!(lsh.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), expected);
        let small = near_duplicate_pairs(&all[..500], 0.95);
        assert_eq!(small.len(), 5);
    }
}
