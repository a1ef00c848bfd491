//! Sentence embeddings inside the sandbox: tokenizer.json + an ONNX BERT-style model, mean-pooled
//! over real tokens and L2-normalised. The model runs on the engine's own encoder when its graph
//! is a BERT one the encoder recognises and agrees with tract on a probe; otherwise on tract.

use std::ops::Range;
use std::sync::Arc;

use tokenizers::{Tokenizer, TruncationParams};
use tract_onnx::pb;
use tract_onnx::prelude::*;

use super::encoder::Encoder;
use super::sentences::sentence_spans;
use super::{normalize, Keyed};
use crate::{Error, Result};

/// BERT's learned position table: nothing longer fits.
pub const MAX_TOKENS: usize = 512;

/// The most texts in one model run.
const BATCH: usize = 16;

/// The sentence-transformers models were trained on texts of up to 128 tokens: a longer text is
/// embedded as overlapping windows of this many tokens, and their vectors averaged, so a fact in
/// the middle of a 300-word message still shapes the vector (and text past `MAX_TOKENS` counts).
const WINDOW_TOKENS: usize = 128;
/// Each window starts this many tokens after the one before it.
const WINDOW_STRIDE: usize = 64;

type Plan = Arc<TypedRunnableModel>;

pub struct Embedder {
    tokenizer: Tokenizer,
    runner: Runner,
    dimension: usize,
    model_id: String,
    /// Why the encoder does not run this model, when it does not.
    fallback_reason: Option<String>,
}

enum Runner {
    Encoder(Box<Encoder>),
    Tract {
        plan: Plan,
        /// Which of input_ids / attention_mask / token_type_ids the model takes, in its input order.
        inputs: Vec<InputKind>,
    },
}

/// Which code computes a model's embeddings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferencePath {
    /// The engine's BERT encoder (`embed::kernels`).
    Encoder,
    /// tract, for graphs the encoder does not recognise.
    Tract,
}

impl InferencePath {
    pub fn as_str(self) -> &'static str {
        match self {
            InferencePath::Encoder => "encoder",
            InferencePath::Tract => "tract",
        }
    }
}

/// Texts the encoder must reproduce tract's vectors on before it is trusted with a model.
const PROBES: [&str; 3] = [
    "dimension probe",
    "The user prefers PostgreSQL for new services, and said so twice in March.",
    "修复中文 CSV 导出的编码问题",
];

/// The least cosine to tract's vector on every probe.
const PROBE_AGREEMENT: f32 = 0.999;

#[derive(Debug, Clone, Copy, PartialEq)]
enum InputKind {
    Ids,
    Mask,
    TypeIds,
}

impl Embedder {
    /// Loads a model on the encoder when it runs it faithfully, else on tract.
    pub fn load(model: &[u8], tokenizer: &[u8]) -> Result<Embedder> {
        Embedder::load_on(model, tokenizer, InferencePath::Encoder)
    }

    /// Loads a model on `wanted`; `Encoder` falls back to tract (and says why) when the encoder
    /// does not recognise the graph or disagrees with tract on the probes.
    pub fn load_on(model: &[u8], tokenizer: &[u8], wanted: InferencePath) -> Result<Embedder> {
        let mut tokenizer = Tokenizer::from_bytes(tokenizer)
            .map_err(|e| Error::Model(format!("tokenizer.json could not be read: {e}")))?;
        // Padded positions would be averaged into the sentence vector; the shipped file also
        // truncates at 128 tokens, far below what the model can take.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| Error::Model(format!("tokenizer truncation: {e}")))?;

        // The exporter's intermediate shape annotations are narrower than what the graph
        // computes (a [b,1,1,s] mask declared [b,1,s,s]); tract infers shapes itself.
        let onnx = tract_onnx::onnx().with_ignore_value_info(true).with_ignore_output_shapes(true);
        let mut proto = onnx
            .proto_model_for_read(&mut &model[..])
            .map_err(|e| Error::Model(format!("model.onnx could not be parsed: {e}")))?;
        let model_id = model_id(model);
        let encoder = match wanted {
            InferencePath::Encoder => Encoder::from_onnx(&proto),
            InferencePath::Tract => Err("tract was asked for".to_string()),
        };
        gather_before_dequantize(&mut proto);

        let graph = proto.graph.as_ref().ok_or_else(|| Error::Model("model.onnx has no graph".into()))?;
        let inputs = graph
            .input
            .iter()
            .map(|i| match i.name.as_str() {
                "input_ids" => Ok(InputKind::Ids),
                "attention_mask" => Ok(InputKind::Mask),
                "token_type_ids" => Ok(InputKind::TypeIds),
                other => Err(Error::Model(format!("model input {other:?} is not one a BERT encoder takes"))),
            })
            .collect::<Result<Vec<_>>>()?;

        // The model declares its inputs as [batch, sequence] with symbolic sizes; tract keeps them.
        let inference = onnx
            .model_for_proto_model(&proto)
            .map_err(|e| Error::Model(format!("model.onnx could not be loaded: {e}")))?;
        let typed = inference
            .into_optimized()
            .map_err(|e| Error::Model(format!("model could not be optimised: {e:#}")))?;
        let plan =
            typed.into_runnable().map_err(|e| Error::Model(format!("model could not be planned: {e}")))?;
        let mut embedder = Embedder {
            tokenizer,
            runner: Runner::Tract { plan, inputs },
            dimension: 0,
            model_id,
            fallback_reason: None,
        };
        let reference = embedder.embed_batch(&PROBES)?;
        embedder.dimension = reference[0].len();
        match encoder {
            Ok(encoder) => {
                let tract = std::mem::replace(&mut embedder.runner, Runner::Encoder(Box::new(encoder)));
                let agreement = embedder.embed_batch(&PROBES).map(|ours| {
                    ours.iter()
                        .zip(&reference)
                        .map(|(a, b)| crate::index::dot(a, b))
                        .fold(f32::INFINITY, f32::min)
                });
                let reason = match agreement {
                    Ok(c) if c >= PROBE_AGREEMENT => None,
                    Ok(c) => Some(format!("the encoder's vectors differ from tract's (cosine {c:.4})")),
                    Err(e) => Some(format!("the encoder failed on a probe: {e}")),
                };
                if let Some(reason) = reason {
                    embedder.runner = tract;
                    embedder.fallback_reason = Some(reason);
                }
            }
            Err(reason) => embedder.fallback_reason = Some(reason),
        }
        Ok(embedder)
    }

    /// Which code computes this model's embeddings.
    pub fn path(&self) -> InferencePath {
        match self.runner {
            Runner::Encoder(_) => InferencePath::Encoder,
            Runner::Tract { .. } => InferencePath::Tract,
        }
    }

    /// Why the model runs on tract, when it does.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// `<file name stem>-<first 8 hex of a content hash>`: two different files never share one.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn embed(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed_batch(&[text])?.remove(0))
    }

    /// Embeds several texts in one model run (padded, with padding masked out of attention and
    /// pooling), which is faster per text than one run each.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(self.run(texts, false)?.into_iter().map(|k| k.vector).collect())
    }

    /// One model run; the token states of each text are averaged whole, and per sentence when
    /// `sentences` asks for keys.
    fn run(&self, texts: &[&str], sentences: bool) -> Result<Vec<Keyed>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = texts
            .iter()
            .map(|t| self.tokenizer.encode(*t, true))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Model(format!("tokenizer: {e}")))?;
        let token_spans: Vec<Vec<Range<usize>>> = encodings
            .iter()
            .zip(texts)
            .map(|(e, t)| if sentences { sentence_tokens(e.get_offsets(), t) } else { Vec::new() })
            .collect();
        let (plan, model_inputs) = match &self.runner {
            Runner::Encoder(encoder) => {
                let sequences: Vec<(&[u32], &[u32])> =
                    encodings.iter().map(|e| (e.get_ids(), e.get_type_ids())).collect();
                let (hidden, rows) =
                    encoder.hidden(&sequences).map_err(|e| Error::Model(format!("encoder: {e}")))?;
                let d = encoder.width();
                return Ok(rows
                    .iter()
                    .zip(&token_spans)
                    .map(|(&(start, len), spans)| pool(&hidden[start * d..(start + len) * d], d, spans))
                    .collect());
            }
            Runner::Tract { plan, inputs } => (plan, inputs),
        };
        let rows = encodings.len();
        let width = encodings.iter().map(|e| e.get_ids().len()).max().unwrap_or(0).max(1);
        let mut ids = vec![0i64; rows * width];
        let mut mask = vec![0i64; rows * width];
        let mut type_ids = vec![0i64; rows * width];
        for (r, enc) in encodings.iter().enumerate() {
            for (c, (&id, &ty)) in enc.get_ids().iter().zip(enc.get_type_ids()).enumerate() {
                ids[r * width + c] = id as i64;
                mask[r * width + c] = 1;
                type_ids[r * width + c] = ty as i64;
            }
        }
        let tensor = |data: &[i64]| -> Result<TValue> {
            Ok(tract_ndarray::Array2::from_shape_vec((rows, width), data.to_vec())
                .map_err(|e| Error::Model(e.to_string()))?
                .into_tensor()
                .into())
        };
        let inputs: TVec<TValue> = model_inputs
            .iter()
            .map(|kind| match kind {
                InputKind::Ids => tensor(&ids),
                InputKind::Mask => tensor(&mask),
                InputKind::TypeIds => tensor(&type_ids),
            })
            .collect::<Result<_>>()?;
        let outputs = plan.run(inputs).map_err(|e| Error::Model(format!("model run: {e}")))?;
        // The token embeddings: the first [rows, width, d] float output (exports differ in what
        // else they return, and in what order: the ids, the mask, a pooled vector).
        let hidden = outputs
            .iter()
            .find(|t| t.datum_type() == DatumType::F32 && t.rank() == 3)
            .ok_or_else(|| Error::Model("the model has no [batch, tokens, dimension] float output".into()))?
            .to_plain_array_view::<f32>()
            .map_err(|e| Error::Model(format!("model output: {e}")))?;
        let shape = hidden.shape();
        if shape.len() != 3 || shape[0] != rows || shape[1] != width {
            return Err(Error::Model(format!(
                "model output has shape {shape:?}, expected [{rows}, {width}, d]"
            )));
        }
        let dim = shape[2];
        let hidden = hidden.as_standard_layout();
        let flat = hidden.as_slice().ok_or_else(|| Error::Model("model output not contiguous".into()))?;
        Ok(encodings
            .iter()
            .zip(&token_spans)
            .enumerate()
            .map(|(r, (enc, spans))| {
                let real = enc.get_ids().len().max(1);
                pool(&flat[r * width * dim..(r * width + real) * dim], dim, spans)
            })
            .collect())
    }

    /// The pieces a text is embedded as: itself when the model's training length holds it, else
    /// overlapping windows of [`WINDOW_TOKENS`] over all of it.
    fn windows<'t>(&self, text: &'t str) -> Result<Vec<&'t str>> {
        let encoding =
            self.tokenizer.encode(text, false).map_err(|e| Error::Model(format!("tokenizer: {e}")))?;
        // Byte offsets into `text`; the truncated tail is in the overflowing encodings.
        let mut offsets = encoding.get_offsets().to_vec();
        for rest in encoding.get_overflowing() {
            offsets.extend_from_slice(rest.get_offsets());
        }
        if offsets.len() <= WINDOW_TOKENS + WINDOW_TOKENS / 4 {
            return Ok(vec![text]);
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        loop {
            let end = (start + WINDOW_TOKENS).min(offsets.len());
            pieces.push(text.get(offsets[start].0..offsets[end - 1].1).unwrap_or(text));
            if end == offsets.len() {
                return Ok(pieces);
            }
            start += WINDOW_STRIDE;
        }
    }

    /// Embeds texts in batches of similar length: a model run pads every text to the longest.
    fn embed_grouped(&self, texts: &[&str], sentences: bool) -> Result<Vec<Keyed>> {
        let mut order: Vec<(usize, usize)> =
            texts.iter().enumerate().map(|(i, t)| Ok((self.token_count(t)?, i))).collect::<Result<_>>()?;
        order.sort_unstable();
        let mut out: Vec<Keyed> = vec![Keyed::default(); texts.len()];
        let mut rest = &order[..];
        while let Some(&(shortest, _)) = rest.first() {
            // A batch ends where padding would cost more than batching saves.
            let n =
                rest.iter().take(BATCH).take_while(|&&(tokens, _)| tokens <= shortest * 5 / 4 + 2).count();
            let (chunk, tail) = rest.split_at(n);
            let batch: Vec<&str> = chunk.iter().map(|&(_, i)| texts[i]).collect();
            for (&(_, i), v) in chunk.iter().zip(self.run(&batch, sentences)?) {
                out[i] = v;
            }
            rest = tail;
        }
        Ok(out)
    }

    /// How many tokens the tokenizer makes of a text (after truncation).
    pub fn token_count(&self, text: &str) -> Result<usize> {
        Ok(self.tokenizer.encode(text, true).map_err(|e| Error::Model(format!("tokenizer: {e}")))?.len())
    }
}

fn model_id(model: &[u8]) -> String {
    format!("onnx-{:016x}", crate::fingerprint::fingerprint(model))
}

/// Weight-only int8 models store each table as `Mul(Cast(q), scale)`. A `Gather` of such a table
/// makes tract dequantise the whole table (30522×384 for BERT's vocabulary) on every run; gathering
/// the int8 rows (and their per-row scales) first and dequantising only those is the same
/// arithmetic on a few rows. Returns how many gathers were rewritten.
pub fn gather_before_dequantize(proto: &mut pb::ModelProto) -> usize {
    let Some(graph) = proto.graph.as_mut() else {
        return 0;
    };
    let initializer_dims = |name: &str| -> Option<Vec<i64>> {
        graph.initializer.iter().find(|t| t.name == name).map(|t| t.dims.clone())
    };
    let producer = |name: &str| graph.node.iter().position(|n| n.output.iter().any(|o| o == name));

    struct Rewrite {
        gather: usize,
        cast: usize,
        quantized: String,
        scale: String,
        per_row: bool,
    }
    let mut rewrites = Vec::new();
    for (gi, gather) in graph.node.iter().enumerate() {
        if gather.op_type != "Gather" || gather.input.len() != 2 {
            continue;
        }
        let axis = gather.attribute.iter().find(|a| a.name == "axis").map(|a| a.i).unwrap_or(0);
        if axis != 0 {
            continue;
        }
        let Some(mi) = producer(&gather.input[0]) else {
            continue;
        };
        let mul = &graph.node[mi];
        if mul.op_type != "Mul" || mul.input.len() != 2 {
            continue;
        }
        let Some(ci) = producer(&mul.input[0]) else {
            continue;
        };
        let cast = &graph.node[ci];
        if cast.op_type != "Cast" || cast.input.len() != 1 {
            continue;
        }
        let (Some(qdims), Some(sdims)) = (initializer_dims(&cast.input[0]), initializer_dims(&mul.input[1]))
        else {
            continue;
        };
        let scalar = sdims.iter().product::<i64>() == 1;
        let per_row = sdims.len() == 2 && qdims.len() == 2 && sdims[0] == qdims[0] && sdims[1] == 1;
        if !(scalar || per_row) {
            continue;
        }
        rewrites.push(Rewrite {
            gather: gi,
            cast: ci,
            quantized: cast.input[0].clone(),
            scale: mul.input[1].clone(),
            per_row,
        });
    }

    let count = rewrites.len();
    let mut new_nodes: Vec<(usize, Vec<pb::NodeProto>)> = Vec::new();
    for rw in &rewrites {
        let gather = &graph.node[rw.gather];
        let cast = &graph.node[rw.cast];
        let indices = gather.input[1].clone();
        let out = gather.output[0].clone();
        let stem = format!("{out}__gbd");
        let mut nodes = vec![
            pb::NodeProto {
                op_type: "Gather".into(),
                name: format!("{stem}_gather_q"),
                input: vec![rw.quantized.clone(), indices.clone()],
                output: vec![format!("{stem}_q")],
                attribute: gather.attribute.clone(),
                ..Default::default()
            },
            pb::NodeProto {
                op_type: "Cast".into(),
                name: format!("{stem}_cast"),
                input: vec![format!("{stem}_q")],
                output: vec![format!("{stem}_f")],
                attribute: cast.attribute.clone(),
                ..Default::default()
            },
        ];
        let scale = if rw.per_row {
            nodes.push(pb::NodeProto {
                op_type: "Gather".into(),
                name: format!("{stem}_gather_s"),
                input: vec![rw.scale.clone(), indices],
                output: vec![format!("{stem}_s")],
                attribute: gather.attribute.clone(),
                ..Default::default()
            });
            format!("{stem}_s")
        } else {
            rw.scale.clone()
        };
        nodes.push(pb::NodeProto {
            op_type: "Mul".into(),
            name: format!("{stem}_mul"),
            input: vec![format!("{stem}_f"), scale],
            output: vec![out],
            ..Default::default()
        });
        new_nodes.push((rw.gather, nodes));
    }
    // Replace each gather in place (keeps topological order), then drop the table-wide
    // dequantisation when nothing else reads it.
    new_nodes.sort_by_key(|(ix, _)| std::cmp::Reverse(*ix));
    for (ix, nodes) in new_nodes {
        graph.node.splice(ix..=ix, nodes);
    }
    loop {
        let consumed: std::collections::HashSet<String> =
            graph.node.iter().flat_map(|n| n.input.iter().cloned()).collect();
        let outputs: std::collections::HashSet<String> =
            graph.output.iter().map(|o| o.name.clone()).collect();
        let before = graph.node.len();
        graph.node.retain(|n| {
            !(matches!(n.op_type.as_str(), "Mul" | "Cast")
                && n.output.iter().all(|o| !consumed.contains(o) && !outputs.contains(o)))
        });
        if graph.node.len() == before {
            break;
        }
    }
    count
}

impl super::TextEmbedder for Embedder {
    fn model_id(&self) -> &str {
        Embedder::model_id(self)
    }
    fn dimension(&self) -> usize {
        Embedder::dimension(self)
    }
    fn inference(&self) -> &str {
        self.path().as_str()
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(self.embed_windowed(texts, false)?.into_iter().map(|k| k.vector).collect())
    }
    fn embed_keyed(&self, texts: &[&str]) -> Result<Vec<Keyed>> {
        self.embed_windowed(texts, true)
    }
}

impl Embedder {
    /// Texts the model's training length holds in one run each (grouped by length); a longer
    /// one as the average of its windows' vectors, with no sentence keys (its windows are them).
    fn embed_windowed(&self, texts: &[&str], sentences: bool) -> Result<Vec<Keyed>> {
        let mut pieces: Vec<&str> = Vec::with_capacity(texts.len());
        let mut owners: Vec<usize> = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            for piece in self.windows(text)? {
                pieces.push(piece);
                owners.push(i);
            }
        }
        let mut embedded = self.embed_grouped(&pieces, sentences)?;
        if pieces.len() == texts.len() {
            return Ok(embedded);
        }
        let mut out =
            vec![Keyed { vector: vec![0f32; self.dimension()], sentences: Vec::new() }; texts.len()];
        let mut pieces_of = vec![0usize; texts.len()];
        owners.iter().for_each(|&i| pieces_of[i] += 1);
        for (k, &i) in embedded.iter_mut().zip(&owners) {
            out[i].vector.iter_mut().zip(&k.vector).for_each(|(acc, x)| *acc += x);
            if pieces_of[i] == 1 {
                out[i].sentences = std::mem::take(&mut k.sentences);
            }
        }
        out.iter_mut().for_each(|k| normalize(&mut k.vector));
        Ok(out)
    }
}

/// The token ranges of a text's sentences (see [`sentence_spans`]): a token belongs to the
/// sentence its last byte is in (a tokenizer may count a word's leading space in its offsets).
/// Special tokens (no bytes) belong to none.
fn sentence_tokens(offsets: &[(usize, usize)], text: &str) -> Vec<Range<usize>> {
    sentence_spans(text)
        .into_iter()
        .filter_map(|span| {
            let inside = |&(s, e): &(usize, usize)| e > s && span.contains(&(e - 1));
            let first = offsets.iter().position(inside)?;
            let len = offsets[first..].iter().take_while(|o| inside(o)).count();
            Some(first..first + len)
        })
        .collect()
}

/// One text's vector (its token states averaged) and its sentence keys (the `[CLS]` state with
/// each sentence's tokens averaged), normalised. `rows` are its real tokens' states.
fn pool(rows: &[f32], d: usize, sentences: &[Range<usize>]) -> Keyed {
    let mean = |tokens: &mut dyn Iterator<Item = usize>| {
        let mut v = vec![0f32; d];
        for t in tokens {
            v.iter_mut().zip(&rows[t * d..(t + 1) * d]).for_each(|(acc, x)| *acc += x);
        }
        normalize(&mut v);
        v
    };
    let tokens = rows.len() / d.max(1);
    let vector = mean(&mut (0..tokens));
    let sentences = if sentences.len() < 2 {
        Vec::new()
    } else {
        sentences
            .iter()
            .filter(|r| r.end <= tokens)
            .map(|r| mean(&mut std::iter::once(0).chain(r.clone())))
            .collect()
    };
    Keyed { vector, sentences }
}
