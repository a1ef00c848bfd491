//! Sentence keys: a memory of several sentences is also found by the one sentence a question is
//! about. "Yep. Taking care of ourselves is vital. I'm off to go swimming with the kids." is one
//! vector about self-care; its last sentence is what "what does she do with her family?" asks.
//!
//! The keys cost no model run: the text's tokens are encoded once, in context, and each
//! sentence's token states (with the `[CLS]` state) are averaged besides the whole text's. They
//! are kept as int8 with one scale per key (388 bytes at 384 dimensions), since they only ever
//! rescore candidates the memory's own vector and its keywords found.

use std::ops::Range;

/// The most keys a memory keeps (a memory of more sentences keeps its first ones).
pub const MAX_KEYS: usize = 8;

/// Byte ranges of a text's sentences: split after `.`, `!`, `?` (and their CJK forms) and at
/// line breaks, each range trimmed. A text of fewer than two sentences has none: its own vector
/// is already its sentence's.
pub fn sentence_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let ends = match c {
            '\n' => true,
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => next.is_none_or(char::is_whitespace),
            _ => false,
        };
        if ends {
            push_trimmed(text, start..i + c.len_utf8(), &mut spans);
            start = i + c.len_utf8();
        }
    }
    push_trimmed(text, start..text.len(), &mut spans);
    if spans.len() < 2 {
        spans.clear();
    }
    spans.truncate(MAX_KEYS);
    spans
}

fn push_trimmed(text: &str, range: Range<usize>, spans: &mut Vec<Range<usize>>) {
    let piece = &text[range.clone()];
    let lead = piece.len() - piece.trim_start().len();
    let trimmed = piece.trim();
    // A lone mark ("…", "!") says nothing of its own.
    if trimmed.chars().any(char::is_alphanumeric) {
        let s = range.start + lead;
        spans.push(s..s + trimmed.len());
    }
}

/// A memory's sentence keys, int8 with one scale each (`1 / |codes|`: each key is a unit vector).
#[derive(Debug, Clone, PartialEq)]
pub struct SentenceKeys {
    dimension: usize,
    scales: Vec<f32>,
    codes: Vec<i8>,
}

impl SentenceKeys {
    /// Keys from unit vectors of `dimension` each; none from an empty list.
    pub fn quantize(dimension: usize, vectors: &[Vec<f32>]) -> Option<SentenceKeys> {
        if vectors.is_empty() || dimension == 0 {
            return None;
        }
        let mut scales = Vec::with_capacity(vectors.len());
        let mut codes = Vec::with_capacity(vectors.len() * dimension);
        for v in vectors.iter().filter(|v| v.len() == dimension) {
            let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
            let step = if max > 0.0 { max / 127.0 } else { 1.0 };
            let code: Vec<i8> = v.iter().map(|x| (x / step).round().clamp(-127.0, 127.0) as i8).collect();
            // The scale makes the stored key unit length, so it scores a cosine whatever the
            // length of what was quantised (a key exported and imported again keeps its codes).
            let norm = code.iter().map(|&c| (c as f32) * (c as f32)).sum::<f32>().sqrt();
            scales.push(if norm > 0.0 { 1.0 / norm } else { 0.0 });
            codes.extend(code);
        }
        (!scales.is_empty()).then_some(SentenceKeys { dimension, scales, codes })
    }

    pub fn len(&self) -> usize {
        self.scales.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// The best cosine of `query` (unit length) to any key.
    pub fn best(&self, query: &[f32]) -> f32 {
        self.codes
            .chunks_exact(self.dimension)
            .zip(&self.scales)
            .map(|(code, scale)| scale * code.iter().zip(query).map(|(&c, q)| c as f32 * q).sum::<f32>())
            .fold(f32::NEG_INFINITY, f32::max)
    }

    /// The keys as unit float vectors again (each within a quantisation step of what was
    /// quantised).
    pub fn dequantized(&self) -> Vec<Vec<f32>> {
        self.codes
            .chunks_exact(self.dimension)
            .zip(&self.scales)
            .map(|(code, scale)| code.iter().map(|&c| c as f32 * scale).collect())
            .collect()
    }

    /// Bytes as stored after the memory's vector: per key, its scale (f32, little-endian) then
    /// its codes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for (code, scale) in self.codes.chunks_exact(self.dimension).zip(&self.scales) {
            out.extend_from_slice(&scale.to_le_bytes());
            out.extend(code.iter().map(|&c| c as u8));
        }
    }

    /// Keys from [`encode`](Self::encode)'s bytes; none when they do not divide into keys of
    /// `dimension`.
    pub fn decode(dimension: usize, bytes: &[u8]) -> Option<SentenceKeys> {
        let width = dimension + 4;
        if dimension == 0 || bytes.is_empty() || !bytes.len().is_multiple_of(width) {
            return None;
        }
        let mut scales = Vec::with_capacity(bytes.len() / width);
        let mut codes = Vec::with_capacity(bytes.len() / width * dimension);
        for key in bytes.chunks_exact(width) {
            scales.push(f32::from_le_bytes([key[0], key[1], key[2], key[3]]));
            codes.extend(key[4..].iter().map(|&b| b as i8));
        }
        Some(SentenceKeys { dimension, scales, codes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        sentence_spans(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn a_text_splits_at_sentence_ends_and_keeps_decimals_and_names_whole() {
        assert_eq!(
            pieces("Melanie: Yep. Taking care of ourselves is vital!  I'm off to go swimming (v2.5 of me)"),
            vec![
                "Melanie: Yep.",
                "Taking care of ourselves is vital!",
                "I'm off to go swimming (v2.5 of me)"
            ]
        );
        assert_eq!(pieces("line one\nline two\n"), vec!["line one", "line two"]);
        assert_eq!(pieces("我喜欢游泳。周末去海边！"), vec!["我喜欢游泳。", "周末去海边！"]);
    }

    #[test]
    fn one_sentence_has_no_keys_and_marks_alone_are_not_sentences() {
        assert!(pieces("Just one sentence here.").is_empty());
        assert!(pieces("Wow! !!! ...").is_empty());
        assert!(pieces("").is_empty());
        let many = "One. ".repeat(20);
        assert_eq!(sentence_spans(&many).len(), MAX_KEYS);
    }

    #[test]
    fn keys_score_within_a_hundredth_of_the_float_vectors_and_survive_their_bytes() {
        let a = [0.6f32, 0.8, 0.0];
        let b = [0.0f32, 0.6, -0.8];
        let keys = SentenceKeys::quantize(3, &[a.to_vec(), b.to_vec()]).unwrap();
        assert_eq!(keys.len(), 2);
        let query = [0.0f32, 0.0, -1.0];
        assert!((keys.best(&query) - 0.8).abs() < 0.01, "{}", keys.best(&query));
        let mut bytes = Vec::new();
        keys.encode(&mut bytes);
        assert_eq!(bytes.len(), 2 * (3 + 4));
        assert_eq!(SentenceKeys::decode(3, &bytes), Some(keys));
        assert_eq!(SentenceKeys::decode(3, &bytes[1..]), None);
        assert_eq!(SentenceKeys::quantize(3, &[]), None);
    }
}
