//! The encoder's arithmetic. The GEMM tile is 4 rows × 8 columns (8 live accumulators) because
//! Cranelift allocates only xmm0–15 for wasm's v128: tract's 16-accumulator tile spills there.
//! Integer weights multiply int16 activations with `i32x4.dot_i16x8_s` (one `pmaddwd`: eight
//! products per instruction, exact, deterministic). Native builds run the same packed layout
//! through scalar loops, so `cargo test` checks the arithmetic the sandbox runs.

/// Columns per packed block: two v128 lanes of four.
const NR: usize = 8;
/// Rows per tile.
const MR: usize = 4;

/// A weight matrix `[k, n]` (input × output, as ONNX MatMul stores it), packed once at load.
pub struct Packed {
    k: usize,
    n: usize,
    kind: PackedKind,
    bias: Vec<f32>,
}

enum PackedKind {
    /// int8 weights widened to int16, per block of 8 columns, per pair of k: 16 values laid out
    /// `[w[2p][c], w[2p+1][c], w[2p][c+1], …]` so one dot of a splatted activation pair gives
    /// four columns' partial sums. `scale[c]` turns the integer sum back into f32.
    Int { data: Vec<i16>, scale: Vec<f32> },
    /// f32 weights per block of 8 columns, per k: 8 values.
    Float { data: Vec<f32> },
}

impl Packed {
    /// `q` is row-major `[k, n]` int8, `scale` one per output column.
    pub fn int8(k: usize, n: usize, q: &[i8], scale: Vec<f32>, bias: Vec<f32>) -> Packed {
        let pairs = k.div_ceil(2);
        let blocks = n.div_ceil(NR);
        let mut data = vec![0i16; blocks * pairs * 2 * NR];
        for b in 0..blocks {
            for p in 0..pairs {
                let base = (b * pairs + p) * 2 * NR;
                for j in 0..NR {
                    let c = b * NR + j;
                    if c >= n {
                        continue;
                    }
                    for half in 0..2 {
                        let kk = 2 * p + half;
                        if kk < k {
                            data[base + 2 * j + half] = q[kk * n + c] as i16;
                        }
                    }
                }
            }
        }
        let mut scale = scale;
        scale.resize(blocks * NR, 0.0);
        Packed { k, n, kind: PackedKind::Int { data, scale }, bias }
    }

    /// `w` is row-major `[k, n]` f32.
    pub fn float(k: usize, n: usize, w: &[f32], bias: Vec<f32>) -> Packed {
        let blocks = n.div_ceil(NR);
        let mut data = vec![0f32; blocks * k * NR];
        for b in 0..blocks {
            for kk in 0..k {
                for j in 0..NR {
                    let c = b * NR + j;
                    if c < n {
                        data[(b * k + kk) * NR + j] = w[kk * n + c];
                    }
                }
            }
        }
        Packed { k, n, kind: PackedKind::Float { data }, bias }
    }

    pub fn input(&self) -> usize {
        self.k
    }

    pub fn output(&self) -> usize {
        self.n
    }

    /// Matrices of one input size side by side, `[k, n1] … [k, nj]` into `[k, n1 + … + nj]`:
    /// Q, K and V read the same input, so one pass over it serves all three.
    pub fn concat(parts: Vec<Packed>) -> Packed {
        let k = parts[0].k;
        debug_assert!(parts.iter().all(|p| p.k == k && p.n.is_multiple_of(NR)));
        let n = parts.iter().map(|p| p.n).sum();
        let bias = parts.iter().flat_map(|p| p.bias.iter().copied()).collect();
        let kind = match &parts[0].kind {
            PackedKind::Int { .. } => {
                let mut data = Vec::new();
                let mut scale = Vec::new();
                for p in &parts {
                    let PackedKind::Int { data: d, scale: s } = &p.kind else { unreachable!() };
                    data.extend_from_slice(d);
                    scale.extend_from_slice(s);
                }
                PackedKind::Int { data, scale }
            }
            PackedKind::Float { .. } => {
                let mut data = Vec::new();
                for p in &parts {
                    let PackedKind::Float { data: d } = &p.kind else { unreachable!() };
                    data.extend_from_slice(d);
                }
                PackedKind::Float { data }
            }
        };
        Packed { k, n, kind, bias }
    }

    pub fn is_int(&self) -> bool {
        matches!(self.kind, PackedKind::Int { .. })
    }

    /// `out[m, n] = x[m, k] · w + bias`, `x` row-major.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        out.clear();
        out.resize(m * self.n, 0.0);
        // Tiles always compute MR rows (the accumulators then stay in registers: a tile of a
        // variable row count indexes them, which puts them in linear memory); rows past `m` are
        // zeros whose results are not written.
        let padded = m.div_ceil(MR) * MR;
        let blocks = self.n.div_ceil(NR);
        let mut store = |r: usize, b: usize, acc: [[f32; NR]; MR]| {
            for (i, acc_row) in acc.iter().enumerate().take(m.saturating_sub(r)) {
                let row = &mut out[(r + i) * self.n..(r + i + 1) * self.n];
                for (j, &a) in acc_row.iter().enumerate() {
                    if let Some(o) = row.get_mut(b * NR + j) {
                        *o = a + self.bias[b * NR + j];
                    }
                }
            }
        };
        match &self.kind {
            PackedKind::Int { data, scale } => {
                let pairs = self.k.div_ceil(2);
                let (panels, row_scale) = quantize_rows(x, m, padded, self.k);
                for rows in (0..padded).step_by(ROW_CHUNK) {
                    for b in 0..blocks {
                        let w = &data[b * pairs * 2 * NR..(b + 1) * pairs * 2 * NR];
                        for r in (rows..padded.min(rows + ROW_CHUNK)).step_by(MR) {
                            let panel = &panels[r * 2 * pairs..(r + MR) * 2 * pairs];
                            let acc = int_tile(panel, w, pairs);
                            let scaled = core::array::from_fn(|i| {
                                core::array::from_fn(|j| {
                                    acc[i][j] as f32 * row_scale[r + i] * scale[b * NR + j]
                                })
                            });
                            store(r, b, scaled);
                        }
                    }
                }
            }
            PackedKind::Float { data } => {
                let mut copy = Vec::new();
                let x = if padded == m {
                    x
                } else {
                    copy.extend_from_slice(&x[..m * self.k]);
                    copy.resize(padded * self.k, 0.0);
                    &copy
                };
                for rows in (0..padded).step_by(ROW_CHUNK) {
                    for b in 0..blocks {
                        let w = &data[b * self.k * NR..(b + 1) * self.k * NR];
                        for r in (rows..padded.min(rows + ROW_CHUNK)).step_by(MR) {
                            store(r, b, float_tile(&x[r * self.k..(r + MR) * self.k], self.k, w));
                        }
                    }
                }
            }
        }
    }
}

/// Rows of activations kept in cache while every column block's weights pass over them: a
/// batch's stacked rows (hundreds) would otherwise be read again from memory for each block.
const ROW_CHUNK: usize = 16 * MR;

/// Each row scaled to int16 by its own largest magnitude, `padded` rows (zeros past `m`), laid
/// out in panels of MR rows: for each pair of k, the MR rows' pairs side by side, so a tile reads
/// its activations with one v128 load per pair. The range is kept small enough that `k` products
/// of int8 × int16 cannot overflow the int32 sum (±8191 at k = 1536).
fn quantize_rows(x: &[f32], m: usize, padded: usize, k: usize) -> (Vec<i16>, Vec<f32>) {
    let pairs = k.div_ceil(2);
    let qmax = ((i32::MAX as i64 / (128 * k as i64)).min(32767)) as f32;
    let mut q = vec![0i16; padded * 2 * pairs];
    let mut scales = vec![1.0; padded];
    for (r, scale_r) in scales.iter_mut().enumerate().take(m) {
        let row = &x[r * k..(r + 1) * k];
        // Comparisons, not f32::max: on wasm that is a call to fmaxf per element.
        let max = row.iter().fold(0f32, |a, v| if v.abs() > a { v.abs() } else { a });
        let scale = if max > 0.0 { max / qmax } else { 1.0 };
        let inv = 1.0 / scale;
        let panel = &mut q[(r / MR) * MR * 2 * pairs..];
        for (kk, v) in row.iter().enumerate() {
            // round_ties_even is one f32.nearest; round() is a call to roundf.
            panel[((kk / 2) * MR + r % MR) * 2 + kk % 2] = (v * inv).round_ties_even() as i16;
        }
        *scale_r = scale;
    }
    (q, scales)
}

/// One panel of MR rows (see `quantize_rows`) by one packed block of 8 columns. Not inlined: in
/// a function of its own the twelve live vectors stay in registers.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn int_tile(x: &[i16], w: &[i16], pairs: usize) -> [[i32; NR]; MR] {
    use core::arch::wasm32::*;
    assert!(x.len() >= pairs * 2 * MR && w.len() >= pairs * 16);
    let zero = i32x4_splat(0);
    let (mut a00, mut a01, mut a10, mut a11) = (zero, zero, zero, zero);
    let (mut a20, mut a21, mut a30, mut a31) = (zero, zero, zero, zero);
    let (wp, xp) = (w.as_ptr(), x.as_ptr());
    macro_rules! pair {
        ($p:expr) => {{
            let p = $p;
            let b0 = v128_load(wp.add(p * 16) as *const v128);
            let b1 = v128_load(wp.add(p * 16 + 8) as *const v128);
            let rows = v128_load(xp.add(p * 8) as *const v128);
            let s = i32x4_shuffle::<0, 0, 0, 0>(rows, rows);
            a00 = i32x4_add(a00, i32x4_dot_i16x8(s, b0));
            a01 = i32x4_add(a01, i32x4_dot_i16x8(s, b1));
            let s = i32x4_shuffle::<1, 1, 1, 1>(rows, rows);
            a10 = i32x4_add(a10, i32x4_dot_i16x8(s, b0));
            a11 = i32x4_add(a11, i32x4_dot_i16x8(s, b1));
            let s = i32x4_shuffle::<2, 2, 2, 2>(rows, rows);
            a20 = i32x4_add(a20, i32x4_dot_i16x8(s, b0));
            a21 = i32x4_add(a21, i32x4_dot_i16x8(s, b1));
            let s = i32x4_shuffle::<3, 3, 3, 3>(rows, rows);
            a30 = i32x4_add(a30, i32x4_dot_i16x8(s, b0));
            a31 = i32x4_add(a31, i32x4_dot_i16x8(s, b1));
        }};
    }
    // Four pairs per iteration: wasmtime checks its epoch at every loop header, and Cranelift
    // keeps vectors that live across that check on the stack, so the accumulators are stored and
    // reloaded once per iteration; unrolled, once per four pairs.
    let mut p = 0;
    // SAFETY: the assert above bounds every load: `w` holds pairs × 16 values, `x` pairs × 8.
    unsafe {
        while p + 4 <= pairs {
            pair!(p);
            pair!(p + 1);
            pair!(p + 2);
            pair!(p + 3);
            p += 4;
        }
        while p < pairs {
            pair!(p);
            p += 1;
        }
    }
    // SAFETY: a v128 is four i32 lanes in lane order; the arrays have the same size.
    unsafe {
        core::mem::transmute::<[[v128; 2]; MR], [[i32; NR]; MR]>([
            [a00, a01],
            [a10, a11],
            [a20, a21],
            [a30, a31],
        ])
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn int_tile(x: &[i16], w: &[i16], pairs: usize) -> [[i32; NR]; MR] {
    let mut out = [[0i32; NR]; MR];
    for p in 0..pairs {
        let b = &w[p * 16..p * 16 + 16];
        for (r, o) in out.iter_mut().enumerate() {
            let (x0, x1) = (x[(p * MR + r) * 2] as i32, x[(p * MR + r) * 2 + 1] as i32);
            for (j, o) in o.iter_mut().enumerate() {
                *o += x0 * b[2 * j] as i32 + x1 * b[2 * j + 1] as i32;
            }
        }
    }
    out
}

/// MR rows of `x` (each `k` values) by one packed block of 8 columns (not inlined, as `int_tile`).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(never)]
fn float_tile(x: &[f32], k: usize, w: &[f32]) -> [[f32; NR]; MR] {
    use core::arch::wasm32::*;
    assert!(x.len() >= MR * k && w.len() >= k * NR);
    let zero = f32x4_splat(0.0);
    let (mut a00, mut a01, mut a10, mut a11) = (zero, zero, zero, zero);
    let (mut a20, mut a21, mut a30, mut a31) = (zero, zero, zero, zero);
    let (wp, xp) = (w.as_ptr(), x.as_ptr());
    macro_rules! column {
        ($kk:expr) => {{
            let kk = $kk;
            let b0 = v128_load(wp.add(kk * 8) as *const v128);
            let b1 = v128_load(wp.add(kk * 8 + 4) as *const v128);
            let s = v128_load32_splat(xp.add(kk) as *const u32);
            a00 = f32x4_add(a00, f32x4_mul(s, b0));
            a01 = f32x4_add(a01, f32x4_mul(s, b1));
            let s = v128_load32_splat(xp.add(k + kk) as *const u32);
            a10 = f32x4_add(a10, f32x4_mul(s, b0));
            a11 = f32x4_add(a11, f32x4_mul(s, b1));
            let s = v128_load32_splat(xp.add(2 * k + kk) as *const u32);
            a20 = f32x4_add(a20, f32x4_mul(s, b0));
            a21 = f32x4_add(a21, f32x4_mul(s, b1));
            let s = v128_load32_splat(xp.add(3 * k + kk) as *const u32);
            a30 = f32x4_add(a30, f32x4_mul(s, b0));
            a31 = f32x4_add(a31, f32x4_mul(s, b1));
        }};
    }
    // Unrolled for the same reason as `int_tile`'s loop.
    let mut kk = 0;
    // SAFETY: the assert above bounds every load: `w` holds k × 8 values, `x` MR rows of k.
    unsafe {
        while kk + 4 <= k {
            column!(kk);
            column!(kk + 1);
            column!(kk + 2);
            column!(kk + 3);
            kk += 4;
        }
        while kk < k {
            column!(kk);
            kk += 1;
        }
    }
    // SAFETY: a v128 is four f32 lanes in lane order; the arrays have the same size.
    unsafe {
        core::mem::transmute::<[[v128; 2]; MR], [[f32; NR]; MR]>([
            [a00, a01],
            [a10, a11],
            [a20, a21],
            [a30, a31],
        ])
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn float_tile(x: &[f32], k: usize, w: &[f32]) -> [[f32; NR]; MR] {
    let mut out = [[0f32; NR]; MR];
    for (r, o) in out.iter_mut().enumerate() {
        for kk in 0..k {
            let a = x[r * k + kk];
            let b = &w[kk * NR..kk * NR + NR];
            for (o, b) in o.iter_mut().zip(b) {
                *o += a * b;
            }
        }
    }
    out
}

/// In place over rows of `gamma.len()` values.
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32], epsilon: f32) {
    let d = gamma.len();
    for row in x.chunks_exact_mut(d) {
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        let inv = 1.0 / (var + epsilon).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// BERT's exact GELU, `x · Φ(x)`, with `erf` as a rational function (below): a loop of
/// multiplies and adds the compiler vectorises, where a call to libm's erff per value cost a
/// tenth of an embedding.
pub fn gelu(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// erf to within a few ulp of f32: the odd/even rational approximation on [-4, 4] that Eigen
/// and XLA use (outside it erf is ±1 in f32).
#[inline(always)]
fn erf(x: f32) -> f32 {
    // f32::clamp is two comparisons (f32::min / max would be calls on wasm).
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_6e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f32], m: usize, k: usize, n: usize, w: &[f32], bias: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; m * n];
        for r in 0..m {
            for c in 0..n {
                out[r * n + c] = bias[c] + (0..k).map(|i| x[r * k + i] * w[i * n + c]).sum::<f32>();
            }
        }
        out
    }

    fn seeded(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn both_kernels_match_a_plain_matrix_product_on_ragged_shapes() {
        // 7 rows: one tile and a part; 70: past one chunk of rows.
        for m in [7, 70] {
            matches_a_plain_matrix_product(m, 37, 19);
        }
    }

    fn matches_a_plain_matrix_product(m: usize, k: usize, n: usize) {
        let x = seeded(m * k, 1);
        let bias = seeded(n, 3);
        let q: Vec<i8> = seeded(k * n, 2).iter().map(|v| (v * 127.0).round() as i8).collect();
        let scale: Vec<f32> = (0..n).map(|c| 0.01 + c as f32 * 0.001).collect();
        let w: Vec<f32> = (0..k * n).map(|i| q[i] as f32 * scale[i % n]).collect();
        let want = reference(&x, m, k, n, &w, &bias);

        let mut got = Vec::new();
        Packed::float(k, n, &w, bias.clone()).apply(&x, m, &mut got);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-4, "float {a} vs {b}");
        }
        Packed::int8(k, n, &q, scale, bias).apply(&x, m, &mut got);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 2e-3, "int {a} vs {b}");
        }
    }

    #[test]
    fn erf_is_within_a_few_ulp_of_libm() {
        let worst = (-6000..=6000)
            .map(|i| i as f32 / 1000.0)
            .map(|x| (erf(x) - libm::erff(x)).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-6, "largest difference {worst}");
    }

    #[test]
    fn gelu_matches_known_values() {
        let mut x = [-3.0f32, -1.0, 0.0, 0.5, 2.0];
        gelu(&mut x);
        let want = [-0.004_049_7, -0.158_655_25, 0.0, 0.345_731_14, 1.954_499_7];
        for (a, b) in x.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
