//! A BERT-family encoder with its own kernels (see `kernels`): embeddings + LayerNorm, N layers
//! of self-attention and GELU feed-forward, the last hidden state. The weights come out of the
//! ONNX file tract parsed; a graph this does not recognise is left to tract.
//!
//! Recognition goes by the parameter names every Hugging Face BERT export keeps
//! (`…embeddings.word_embeddings.weight`, `…encoder.layer.N.attention.self.query.bias`, …):
//! each dense layer is the MatMul feeding the Add of its named bias. The loader then checks the
//! result against tract on a probe text before it trusts it.

use std::collections::HashMap;

use tract_onnx::pb;

use super::kernels::{gelu, layer_norm, Packed};
use crate::index::dot;

pub struct Encoder {
    word: Table,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embed_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    max_positions: usize,
}

struct Layer {
    qkv: Packed,
    attention_out: Packed,
    attention_norm: Norm,
    intermediate: Packed,
    output: Packed,
    output_norm: Norm,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    epsilon: f32,
}

/// The word table stays int8 when the file stores it so (11.7 MB instead of 46.9 for BERT's
/// vocabulary); a row is dequantised when a token reads it.
enum Table {
    Int8 { q: Vec<i8>, row_scale: Vec<f32>, width: usize },
    Float { data: Vec<f32>, width: usize },
}

impl Table {
    fn rows(&self) -> usize {
        match self {
            Table::Int8 { q, width, .. } => q.len() / width,
            Table::Float { data, width } => data.len() / width,
        }
    }

    fn add_row(&self, row: usize, out: &mut [f32]) {
        match self {
            Table::Int8 { q, row_scale, width } => {
                let s = row_scale[row];
                for (o, &v) in out.iter_mut().zip(&q[row * width..(row + 1) * width]) {
                    *o += v as f32 * s;
                }
            }
            Table::Float { data, width } => {
                for (o, v) in out.iter_mut().zip(&data[row * width..(row + 1) * width]) {
                    *o += v;
                }
            }
        }
    }
}

impl Encoder {
    /// The hidden state's width: the length of one token's row.
    pub fn width(&self) -> usize {
        self.hidden
    }

    /// The last hidden state of one or more token sequences, stacked row after row (one row per
    /// token), with each sequence's first row and length. Sequences are stacked for the dense
    /// layers, so a batch costs no padding; attention runs per sequence.
    #[allow(clippy::type_complexity)]
    pub fn hidden(&self, sequences: &[(&[u32], &[u32])]) -> Result<(Vec<f32>, Vec<(usize, usize)>), String> {
        let d = self.hidden;
        let mut spans = Vec::with_capacity(sequences.len());
        let mut rows = 0;
        for (ids, _) in sequences {
            let len = ids.len().max(1);
            if len > self.max_positions {
                return Err(format!("{len} tokens: the model takes at most {}", self.max_positions));
            }
            spans.push((rows, len));
            rows += len;
        }
        let mut h = vec![0f32; rows * d];
        for ((ids, types), &(start, _)) in sequences.iter().zip(&spans) {
            let pad = [0u32];
            let ids: &[u32] = if ids.is_empty() { &pad } else { ids };
            for (pos, &id) in ids.iter().enumerate() {
                let row = &mut h[(start + pos) * d..(start + pos + 1) * d];
                let id = id as usize;
                if id >= self.word.rows() {
                    return Err(format!("token id {id} is outside the vocabulary"));
                }
                self.word.add_row(id, row);
                for (o, v) in row.iter_mut().zip(&self.position[pos * d..(pos + 1) * d]) {
                    *o += v;
                }
                let ty = types.get(pos).copied().unwrap_or(0) as usize;
                let ty = if (ty + 1) * d <= self.token_type.len() { ty } else { 0 };
                for (o, v) in row.iter_mut().zip(&self.token_type[ty * d..(ty + 1) * d]) {
                    *o += v;
                }
            }
        }
        self.embed_norm.apply(&mut h);

        let mut qkv = Vec::new();
        let mut context = vec![0f32; rows * d];
        let mut tmp = Vec::new();
        let mut inner = Vec::new();
        for layer in &self.layers {
            layer.qkv.apply(&h, rows, &mut qkv);
            for &(start, len) in &spans {
                self.attend(&qkv, start, len, &mut context);
            }
            layer.attention_out.apply(&context, rows, &mut tmp);
            add(&mut h, &tmp);
            layer.attention_norm.apply(&mut h);
            layer.intermediate.apply(&h, rows, &mut inner);
            gelu(&mut inner);
            layer.output.apply(&inner, rows, &mut tmp);
            add(&mut h, &tmp);
            layer.output_norm.apply(&mut h);
        }

        Ok((h, spans))
    }

    /// Scaled dot-product attention of one sequence, every head, into `context`.
    fn attend(&self, qkv: &[f32], start: usize, len: usize, context: &mut [f32]) {
        let d = self.hidden;
        let hd = d / self.heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let row = |t: usize| &qkv[(start + t) * 3 * d..(start + t + 1) * 3 * d];
        let mut p = vec![0f32; len];
        for head in 0..self.heads {
            let off = head * hd;
            for s in 0..len {
                let q = &row(s)[off..off + hd];
                let mut max = f32::NEG_INFINITY;
                for (t, pt) in p.iter_mut().enumerate() {
                    *pt = dot(q, &row(t)[d + off..d + off + hd]) * scale;
                    max = max.max(*pt);
                }
                let mut sum = 0.0;
                for pt in p.iter_mut() {
                    *pt = (*pt - max).exp();
                    sum += *pt;
                }
                let out = &mut context[(start + s) * d + off..(start + s) * d + off + hd];
                out.iter_mut().for_each(|o| *o = 0.0);
                for (t, &pt) in p.iter().enumerate() {
                    let w = pt / sum;
                    for (o, v) in out.iter_mut().zip(&row(t)[2 * d + off..2 * d + off + hd]) {
                        *o += w * v;
                    }
                }
            }
        }
    }

    /// The encoder for a BERT graph, or why this graph is not one it runs.
    pub fn from_onnx(proto: &pb::ModelProto) -> Result<Encoder, String> {
        let graph = proto.graph.as_ref().ok_or("the model has no graph")?;
        let g = Graph::new(graph);
        let word_name = g
            .names()
            .find(|n| n.ends_with("embeddings.word_embeddings.weight"))
            .ok_or("no embeddings.word_embeddings.weight")?
            .to_string();
        let prefix = &word_name[..word_name.len() - "embeddings.word_embeddings.weight".len()];
        let name = |rest: &str| format!("{prefix}{rest}");

        let word = match g.weight(&word_name)? {
            Weight::Float { data, dims } => Table::Float { width: dims[1], data },
            Weight::Int8 { q, scale, dims, scale_dims } => {
                let rows = dims[0];
                let row_scale = match scale_dims.iter().product::<usize>() {
                    1 => vec![scale[0]; rows],
                    n if n == rows => scale,
                    _ => return Err("word table scale is neither per row nor one".into()),
                };
                Table::Int8 { q, row_scale, width: dims[1] }
            }
        };
        let hidden = match &word {
            Table::Int8 { width, .. } | Table::Float { width, .. } => *width,
        };
        if !hidden.is_multiple_of(8) {
            return Err(format!("hidden size {hidden} is not a multiple of 8"));
        }
        let position = g.weight(&name("embeddings.position_embeddings.weight"))?.dequantized();
        let max_positions = position.len() / hidden;
        // Exports that fold token types away (one type) may drop the table: zeros add nothing.
        let token_type = match g.weight(&name("embeddings.token_type_embeddings.weight")) {
            Ok(w) => w.dequantized(),
            Err(_) => vec![0f32; hidden],
        };
        let embed_norm = g.norm(&name("embeddings.LayerNorm"), hidden)?;

        let mut layers = Vec::new();
        for i in 0.. {
            let l = |rest: &str| name(&format!("encoder.layer.{i}.{rest}"));
            if !g.has(&l("attention.self.query.bias")) {
                break;
            }
            let q = g.dense(&l("attention.self.query.bias"))?;
            let k = g.dense(&l("attention.self.key.bias"))?;
            let v = g.dense(&l("attention.self.value.bias"))?;
            if [&q, &k, &v].iter().any(|p| p.input() != hidden || p.output() != hidden)
                || q.is_int() != k.is_int()
                || k.is_int() != v.is_int()
            {
                return Err(format!("layer {i}: query, key and value are not {hidden}×{hidden} alike"));
            }
            layers.push(Layer {
                qkv: Packed::concat(vec![q, k, v]),
                attention_out: g.dense(&l("attention.output.dense.bias"))?,
                attention_norm: g.norm(&l("attention.output.LayerNorm"), hidden)?,
                intermediate: g.dense(&l("intermediate.dense.bias"))?,
                output: g.dense(&l("output.dense.bias"))?,
                output_norm: g.norm(&l("output.LayerNorm"), hidden)?,
            });
        }
        if layers.is_empty() {
            return Err("no encoder.layer.0".into());
        }
        let heads = g.heads(&name("encoder.layer.0.attention.self.query.bias"), hidden)?;
        if !graph.node.iter().any(|n| n.op_type == "Erf") {
            return Err("the feed-forward activation is not the erf GELU".into());
        }
        Ok(Encoder { word, position, token_type, embed_norm, layers, hidden, heads, max_positions })
    }
}

fn add(acc: &mut [f32], x: &[f32]) {
    for (a, b) in acc.iter_mut().zip(x) {
        *a += b;
    }
}

impl Norm {
    fn apply(&self, x: &mut [f32]) {
        layer_norm(x, &self.gamma, &self.beta, self.epsilon);
    }
}

enum Weight {
    Float {
        data: Vec<f32>,
        dims: Vec<usize>,
    },
    /// `Mul(Cast(q), scale)`: weight-only int8 with a broadcast scale.
    Int8 {
        q: Vec<i8>,
        scale: Vec<f32>,
        dims: Vec<usize>,
        scale_dims: Vec<usize>,
    },
}

impl Weight {
    fn dims(&self) -> &[usize] {
        match self {
            Weight::Float { dims, .. } | Weight::Int8 { dims, .. } => dims,
        }
    }

    fn dequantized(self) -> Vec<f32> {
        match self {
            Weight::Float { data, .. } => data,
            Weight::Int8 { q, scale, dims, scale_dims } => {
                let cols = *dims.last().unwrap_or(&1);
                let n = scale_dims.iter().product::<usize>();
                q.iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let s = if n == 1 {
                            scale[0]
                        } else if n == cols {
                            scale[i % cols]
                        } else {
                            scale[(i / cols) % n]
                        };
                        v as f32 * s
                    })
                    .collect()
            }
        }
    }
}

/// Name lookups over one ONNX graph.
struct Graph<'a> {
    initializers: HashMap<&'a str, &'a pb::TensorProto>,
    constants: HashMap<&'a str, &'a pb::TensorProto>,
    producer: HashMap<&'a str, &'a pb::NodeProto>,
    consumers: HashMap<&'a str, Vec<&'a pb::NodeProto>>,
}

impl<'a> Graph<'a> {
    fn new(graph: &'a pb::GraphProto) -> Graph<'a> {
        let mut g = Graph {
            initializers: graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect(),
            constants: HashMap::new(),
            producer: HashMap::new(),
            consumers: HashMap::new(),
        };
        for node in &graph.node {
            for out in &node.output {
                g.producer.insert(out.as_str(), node);
            }
            for input in &node.input {
                g.consumers.entry(input.as_str()).or_default().push(node);
            }
            if node.op_type == "Constant" {
                if let (Some(out), Some(t)) =
                    (node.output.first(), node.attribute.iter().find_map(|a| a.t.as_ref()))
                {
                    g.constants.insert(out.as_str(), t);
                }
            }
        }
        g
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.initializers.keys().copied().chain(self.producer.keys().copied())
    }

    fn has(&self, name: &str) -> bool {
        self.initializers.contains_key(name) || self.producer.contains_key(name)
    }

    fn tensor(&self, name: &str) -> Option<&'a pb::TensorProto> {
        self.initializers.get(name).or_else(|| self.constants.get(name)).copied()
    }

    fn weight(&self, name: &str) -> Result<Weight, String> {
        if let Some(t) = self.tensor(name) {
            return Ok(Weight::Float { data: floats(t).ok_or(format!("{name}: not f32"))?, dims: dims(t) });
        }
        let node = self.producer.get(name).ok_or(format!("no tensor {name}"))?;
        if node.op_type != "Mul" || node.input.len() != 2 {
            return Err(format!("{name} is made by {}, not a dequantising Mul", node.op_type));
        }
        for (cast_side, scale_side) in [(0, 1), (1, 0)] {
            let Some(cast) = self.producer.get(node.input[cast_side].as_str()) else { continue };
            if cast.op_type != "Cast" {
                continue;
            }
            let (Some(qt), Some(st)) = (self.tensor(&cast.input[0]), self.tensor(&node.input[scale_side]))
            else {
                continue;
            };
            let q = int8s(qt).ok_or(format!("{name}: quantised weights are not int8"))?;
            let scale = floats(st).ok_or(format!("{name}: scale is not f32"))?;
            return Ok(Weight::Int8 { q, scale, dims: dims(qt), scale_dims: dims(st) });
        }
        Err(format!("{name}: Mul is not Cast(int8) × scale"))
    }

    fn norm(&self, stem: &str, hidden: usize) -> Result<Norm, String> {
        let gamma_name = format!("{stem}.weight");
        let gamma = self.weight(&gamma_name)?.dequantized();
        let beta = self.weight(&format!("{stem}.bias"))?.dequantized();
        if gamma.len() != hidden || beta.len() != hidden {
            return Err(format!("{stem}: not {hidden} wide"));
        }
        let node = self
            .consumers
            .get(gamma_name.as_str())
            .and_then(|c| c.iter().find(|n| n.op_type == "LayerNormalization"))
            .ok_or(format!("{stem} is not a LayerNormalization"))?;
        let epsilon = node.attribute.iter().find(|a| a.name == "epsilon").map(|a| a.f).unwrap_or(1e-5);
        Ok(Norm { gamma, beta, epsilon })
    }

    /// The dense layer whose bias is `bias`: the MatMul feeding the Add that reads it.
    fn dense(&self, bias_name: &str) -> Result<Packed, String> {
        let bias = self.weight(bias_name)?.dequantized();
        let add = self
            .consumers
            .get(bias_name)
            .and_then(|c| c.iter().find(|n| n.op_type == "Add"))
            .ok_or(format!("{bias_name} is not added to anything"))?;
        let other = add.input.iter().find(|i| *i != bias_name).ok_or(format!("{bias_name}: odd Add"))?;
        let matmul = self
            .producer
            .get(other.as_str())
            .filter(|n| n.op_type == "MatMul" && n.input.len() == 2)
            .ok_or(format!("{bias_name} is not the bias of a MatMul"))?;
        let weight = self.weight(&matmul.input[1])?;
        let d = weight.dims().to_vec();
        if d.len() != 2 || d[1] != bias.len() {
            return Err(format!("{bias_name}: weight {d:?} does not match the bias"));
        }
        let (k, n) = (d[0], d[1]);
        Ok(match weight {
            Weight::Float { data, .. } => Packed::float(k, n, &data, bias),
            Weight::Int8 { q, scale, scale_dims, .. } => {
                let count = scale_dims.iter().product::<usize>();
                let scale = match count {
                    1 => vec![scale[0]; n],
                    c if c == n && scale_dims.last() == Some(&n) => scale,
                    _ => return Err(format!("{bias_name}: weight scale {scale_dims:?} is not per column")),
                };
                Packed::int8(k, n, &q, scale, bias)
            }
        })
    }

    /// Heads from the Reshape of the query into `[batch, sequence, heads, head size]`: the last
    /// constant of its shape is the head size.
    fn heads(&self, query_bias: &str, hidden: usize) -> Result<usize, String> {
        let add = self
            .consumers
            .get(query_bias)
            .and_then(|c| c.iter().find(|n| n.op_type == "Add"))
            .ok_or("query bias unused")?;
        let reshape = self
            .consumers
            .get(add.output[0].as_str())
            .and_then(|c| c.iter().find(|n| n.op_type == "Reshape"))
            .ok_or("the query is not reshaped into heads")?;
        let shape = reshape.input.get(1).ok_or("reshape without a shape")?;
        let last = if let Some(t) = self.tensor(shape) {
            ints(t).and_then(|v| v.last().copied())
        } else {
            let concat = self.producer.get(shape.as_str()).filter(|n| n.op_type == "Concat");
            concat
                .and_then(|c| c.input.last())
                .and_then(|i| self.tensor(i))
                .and_then(ints)
                .and_then(|v| v.last().copied())
        };
        match last {
            Some(head) if head > 0 && hidden.is_multiple_of(head as usize) => Ok(hidden / head as usize),
            _ => Err("the head size could not be read from the graph".into()),
        }
    }
}

fn dims(t: &pb::TensorProto) -> Vec<usize> {
    t.dims.iter().map(|&d| d.max(0) as usize).collect()
}

const FLOAT: i32 = 1;
const INT8: i32 = 3;
const INT64: i32 = 7;

fn floats(t: &pb::TensorProto) -> Option<Vec<f32>> {
    if t.data_type != FLOAT {
        return None;
    }
    if !t.raw_data.is_empty() {
        return Some(
            t.raw_data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        );
    }
    Some(t.float_data.clone())
}

fn int8s(t: &pb::TensorProto) -> Option<Vec<i8>> {
    if t.data_type != INT8 {
        return None;
    }
    if !t.raw_data.is_empty() {
        return Some(t.raw_data.iter().map(|&b| b as i8).collect());
    }
    Some(t.int32_data.iter().map(|&v| v as i8).collect())
}

fn ints(t: &pb::TensorProto) -> Option<Vec<i64>> {
    if t.data_type != INT64 {
        return None;
    }
    if !t.raw_data.is_empty() {
        return Some(
            t.raw_data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect(),
        );
    }
    Some(t.int64_data.clone())
}
