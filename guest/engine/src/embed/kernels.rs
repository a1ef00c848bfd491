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
        match &self.kind {
            PackedKind::Int { data, scale } => {
                let (qx, row_scale, stride) = quantize_rows(x, m, self.k);
                let pairs = self.k.div_ceil(2);
                for b in 0..self.n.div_ceil(NR) {
                    let w = &data[b * pairs * 2 * NR..(b + 1) * pairs * 2 * NR];
                    let mut r = 0;
                    while r < m {
                        let rows = (m - r).min(MR);
                        let acc = int_tile(&qx[r * stride..], stride, rows, w, pairs);
                        for (i, acc_row) in acc.iter().enumerate().take(rows) {
                            for (j, &a) in acc_row.iter().enumerate() {
                                let c = b * NR + j;
                                if c < self.n {
                                    out[(r + i) * self.n + c] =
                                        a as f32 * row_scale[r + i] * scale[c] + self.bias[c];
                                }
                            }
                        }
                        r += rows;
                    }
                }
            }
            PackedKind::Float { data } => {
                for b in 0..self.n.div_ceil(NR) {
                    let w = &data[b * self.k * NR..(b + 1) * self.k * NR];
                    let mut r = 0;
                    while r < m {
                        let rows = (m - r).min(MR);
                        let acc = float_tile(&x[r * self.k..], self.k, rows, w);
                        for (i, acc_row) in acc.iter().enumerate().take(rows) {
                            for (j, &a) in acc_row.iter().enumerate() {
                                let c = b * NR + j;
                                if c < self.n {
                                    out[(r + i) * self.n + c] = a + self.bias[c];
                                }
                            }
                        }
                        r += rows;
                    }
                }
            }
        }
    }
}

/// Each row scaled to int16 by its own largest magnitude. The range is kept small enough that
/// `k` products of int8 × int16 cannot overflow the int32 sum (±8191 at k = 1536).
fn quantize_rows(x: &[f32], m: usize, k: usize) -> (Vec<i16>, Vec<f32>, usize) {
    let stride = k.div_ceil(2) * 2;
    let qmax = ((i32::MAX as i64 / (128 * k as i64)).min(32767)) as f32;
    let mut q = vec![0i16; m * stride];
    let mut scales = Vec::with_capacity(m);
    for r in 0..m {
        let row = &x[r * k..(r + 1) * k];
        let max = row.iter().fold(0f32, |a, v| a.max(v.abs()));
        let scale = if max > 0.0 { max / qmax } else { 1.0 };
        let inv = 1.0 / scale;
        for (d, v) in q[r * stride..r * stride + k].iter_mut().zip(row) {
            *d = (v * inv).round() as i16;
        }
        scales.push(scale);
    }
    (q, scales, stride)
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn int_tile(x: &[i16], stride: usize, rows: usize, w: &[i16], pairs: usize) -> [[i32; NR]; MR] {
    use core::arch::wasm32::*;
    let mut acc = [[i32x4_splat(0); 2]; MR];
    // SAFETY: every load reads inside `w` (pairs × 16 values) or inside the first `rows` rows of
    // `x` (stride values each, stride even, so a pair never crosses a row).
    unsafe {
        let wp = w.as_ptr();
        let xp = x.as_ptr();
        for p in 0..pairs {
            let b0 = v128_load(wp.add(p * 16) as *const v128);
            let b1 = v128_load(wp.add(p * 16 + 8) as *const v128);
            for (r, acc_r) in acc.iter_mut().enumerate().take(rows) {
                let pair = (xp.add(r * stride + 2 * p) as *const i32).read_unaligned();
                let a = i32x4_splat(pair);
                acc_r[0] = i32x4_add(acc_r[0], i32x4_dot_i16x8(a, b0));
                acc_r[1] = i32x4_add(acc_r[1], i32x4_dot_i16x8(a, b1));
            }
        }
    }
    // SAFETY: a v128 is four i32 lanes in lane order; the arrays have the same size.
    unsafe { core::mem::transmute::<[[v128; 2]; MR], [[i32; NR]; MR]>(acc) }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn int_tile(x: &[i16], stride: usize, rows: usize, w: &[i16], pairs: usize) -> [[i32; NR]; MR] {
    let mut out = [[0i32; NR]; MR];
    for (r, o) in out.iter_mut().enumerate().take(rows) {
        let xr = &x[r * stride..r * stride + 2 * pairs];
        for p in 0..pairs {
            let (x0, x1) = (xr[2 * p] as i32, xr[2 * p + 1] as i32);
            let b = &w[p * 16..p * 16 + 16];
            for (j, o) in o.iter_mut().enumerate() {
                *o += x0 * b[2 * j] as i32 + x1 * b[2 * j + 1] as i32;
            }
        }
    }
    out
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn float_tile(x: &[f32], k: usize, rows: usize, w: &[f32]) -> [[f32; NR]; MR] {
    use core::arch::wasm32::*;
    let mut acc = [[f32x4_splat(0.0); 2]; MR];
    // SAFETY: loads stay inside `w` (k × 8 values) and the first `rows` rows of `x`.
    unsafe {
        let wp = w.as_ptr();
        for kk in 0..k {
            let b0 = v128_load(wp.add(kk * 8) as *const v128);
            let b1 = v128_load(wp.add(kk * 8 + 4) as *const v128);
            for (r, acc_r) in acc.iter_mut().enumerate().take(rows) {
                let a = f32x4_splat(*x.get_unchecked(r * k + kk));
                acc_r[0] = f32x4_add(acc_r[0], f32x4_mul(a, b0));
                acc_r[1] = f32x4_add(acc_r[1], f32x4_mul(a, b1));
            }
        }
    }
    // SAFETY: a v128 is four f32 lanes in lane order; the arrays have the same size.
    unsafe { core::mem::transmute::<[[v128; 2]; MR], [[f32; NR]; MR]>(acc) }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
fn float_tile(x: &[f32], k: usize, rows: usize, w: &[f32]) -> [[f32; NR]; MR] {
    let mut out = [[0f32; NR]; MR];
    for (r, o) in out.iter_mut().enumerate().take(rows) {
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

/// BERT's exact GELU, `x · Φ(x)`.
pub fn gelu(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + libm::erff(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
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
        let (m, k, n) = (7, 37, 19);
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
    fn gelu_matches_known_values() {
        let mut x = [-3.0f32, -1.0, 0.0, 0.5, 2.0];
        gelu(&mut x);
        let want = [-0.004_049_7, -0.158_655_25, 0.0, 0.345_731_14, 1.954_499_7];
        for (a, b) in x.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
