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
}
