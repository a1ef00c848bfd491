//! Vector search over slots: an exact scan of a flat, contiguous buffer (one cache-friendly pass
//! that the compiler vectorises with simd128).

const NONE: u32 = u32::MAX;

/// Vectors of some slots, packed row after row: a removed row is replaced by the last, so the
/// buffer holds exactly its live vectors (sealing moves them out to a segment).
#[derive(Debug)]
pub struct VectorIndex {
    dim: usize,
    data: Vec<f32>,
    slot_of_row: Vec<u32>,
    row_of_slot: Vec<u32>,
}

impl VectorIndex {
    pub fn new(dim: usize) -> Self {
        VectorIndex { dim, data: Vec::new(), slot_of_row: Vec::new(), row_of_slot: Vec::new() }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn len(&self) -> usize {
        self.slot_of_row.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of_row.is_empty()
    }

    fn row(&self, slot: u32) -> Option<usize> {
        self.row_of_slot.get(slot as usize).filter(|&&r| r != NONE).map(|&r| r as usize)
    }

    /// Room for `rows` more vectors: opening a bank knows how many are coming, and growing the
    /// buffer by doubling would copy it several times over.
    pub fn reserve(&mut self, rows: usize) {
        self.data.reserve(rows * self.dim);
        self.slot_of_row.reserve(rows);
    }

    pub fn insert(&mut self, slot: u32, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dim);
        if let Some(r) = self.row(slot) {
            self.data[r * self.dim..(r + 1) * self.dim].copy_from_slice(vector);
            return;
        }
        if self.row_of_slot.len() <= slot as usize {
            self.row_of_slot.resize(slot as usize + 1, NONE);
        }
        self.row_of_slot[slot as usize] = self.slot_of_row.len() as u32;
        self.slot_of_row.push(slot);
        self.data.extend_from_slice(vector);
    }

    /// Takes a slot's vector out of the buffer.
    pub fn remove(&mut self, slot: u32) -> Option<Vec<f32>> {
        let r = self.row(slot)?;
        let dim = self.dim;
        let last = self.slot_of_row.len() - 1;
        let vector = self.data[r * dim..(r + 1) * dim].to_vec();
        if r != last {
            self.data.copy_within(last * dim..(last + 1) * dim, r * dim);
            let moved = self.slot_of_row[last];
            self.slot_of_row[r] = moved;
            self.row_of_slot[moved as usize] = r as u32;
        }
        self.slot_of_row.pop();
        self.data.truncate(last * dim);
        self.row_of_slot[slot as usize] = NONE;
        Some(vector)
    }

    pub fn get(&self, slot: u32) -> Option<&[f32]> {
        self.row(slot).map(|r| &self.data[r * self.dim..(r + 1) * self.dim])
    }

    /// Every (slot, vector) in the buffer.
    pub fn rows(&self) -> impl Iterator<Item = (u32, &[f32])> {
        self.slot_of_row.iter().copied().zip(self.data.chunks_exact(self.dim))
    }

    /// The `limit` eligible slots most similar to `query` (dot product of unit vectors = cosine).
    pub fn search(&self, query: &[f32], limit: usize, eligible: impl Fn(u32) -> bool) -> Vec<(u32, f32)> {
        let mut top = TopK::new(limit);
        for (slot, row) in self.rows() {
            if eligible(slot) {
                top.push(slot, dot(query, row));
            }
        }
        top.into_sorted()
    }
}

/// Cosine similarity of unit vectors. Over the shorter of the two, so a missing vector (empty)
/// scores 0 rather than panicking.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        wasm_dot(a, b)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        // Eight independent accumulators let the compiler keep two vector lanes busy.
        let mut acc = [0f32; 8];
        for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
            for j in 0..8 {
                acc[j] += x[j] * y[j];
            }
        }
        let tail = n - n % 8;
        acc.iter().sum::<f32>() + a[tail..].iter().zip(&b[tail..]).map(|(x, y)| x * y).sum::<f32>()
    }
}

/// The component's dot product, written for what Cranelift makes of it: wasmtime checks the
/// epoch at every loop header and Cranelift keeps vectors that live across that check on the
/// stack, so the portable loop above stored and reloaded its accumulators (and re-checked slice
/// bounds) every eight floats. Here a loop iteration takes 32 floats, with no bounds checks.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn wasm_dot(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::wasm32::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [f32x4_splat(0.0); 4];
    for chunk in 0..n / 32 {
        for j in 0..8 {
            // SAFETY: 32·chunk + 4·j + 4 <= 32·(n / 32) <= n, within both slices.
            let (x, y) = unsafe {
                let at = 32 * chunk + 4 * j;
                (v128_load(pa.add(at) as *const v128), v128_load(pb.add(at) as *const v128))
            };
            acc[j % 4] = f32x4_add(acc[j % 4], f32x4_mul(x, y));
        }
    }
    let v = f32x4_add(f32x4_add(acc[0], acc[1]), f32x4_add(acc[2], acc[3]));
    let lanes = f32x4_extract_lane::<0>(v)
        + f32x4_extract_lane::<1>(v)
        + f32x4_extract_lane::<2>(v)
        + f32x4_extract_lane::<3>(v);
    let tail = n - n % 32;
    lanes + a[tail..n].iter().zip(&b[tail..n]).map(|(x, y)| x * y).sum::<f32>()
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
/// of 12-bit sign codes, seeded, so runs are repeatable): a pair at cosine 0.95 shares a bucket
/// in at least one table with probability ≈ 0.995, and each vector is compared only with a few
/// bucket mates, so the work grows linearly with the bank.
pub fn near_duplicate_pairs(vectors: &[(u32, &[f32])], threshold: f32) -> Vec<(u32, u32, f32)> {
    const EXHAUSTIVE_BELOW: usize = 2000;
    const TABLES: usize = 16;
    const BITS: usize = 12;
    /// Within one bucket, each vector is compared with this many before it (bounds the cost
    /// when very many vectors are alike; duplicates then chain through their neighbours).
    const PER_BUCKET: usize = 8;
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
    for t in 0..TABLES {
        let mut coded: Vec<(u16, usize)> = vectors
            .iter()
            .enumerate()
            .map(|(i, (_, v))| {
                let mut code = 0u16;
                for b in 0..BITS {
                    let plane = &planes[(t * BITS + b) * dim..(t * BITS + b + 1) * dim];
                    code = (code << 1) | u16::from(dot(v, plane) >= 0.0);
                }
                (code, i)
            })
            .collect();
        coded.sort_unstable();
        for n in 0..coded.len() {
            let (code, i) = coded[n];
            for &(other_code, j) in coded[n.saturating_sub(PER_BUCKET)..n].iter().rev() {
                if other_code != code {
                    break;
                }
                check(i, j, &mut out);
            }
        }
    }
    // A pair found in several tables is reported once.
    out.sort_by_key(|p| (p.0, p.1));
    out.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_covers_every_length_and_a_missing_vector_scores_zero() {
        for n in [0, 1, 7, 8, 31, 32, 33, 384, 390] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "n = {n}");
        }
        assert_eq!(dot(&[0.5; 384], &[]), 0.0);
    }

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
