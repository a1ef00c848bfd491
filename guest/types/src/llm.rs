//! The language model a host lends the engine: one completion call, and what it can answer.

use std::fmt;

use serde::de::DeserializeOwned;

use crate::names::LlmOperation;

/// One completion the engine asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    /// What the call is for; hosts may route each operation to its own model.
    pub operation: LlmOperation,
    /// The system message.
    pub system: String,
    /// The user message.
    pub prompt: String,
    /// A JSON Schema the answer must follow, when the engine wants JSON.
    pub json_schema: Option<String>,
    /// The answer's token budget.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LlmResponse {
    /// The answer's text (the engine reads JSON out of it tolerantly).
    pub text: String,
    /// Tokens the prompt took, as the server counted them.
    pub prompt_tokens: u32,
    /// Tokens the answer took.
    pub completion_tokens: u32,
}

/// Why there is no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmError {
    /// There is no model: the engine uses its rule-based path.
    Unavailable(String),
    /// The call failed or the answer was unusable.
    Failed(String),
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LlmError::Unavailable(m) => write!(f, "no language model: {m}"),
            LlmError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LlmError {}

/// A language model the engine may ask.
pub trait Llm: Send + Sync {
    /// One completion.
    fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError>;
}

/// No model at all: every call is [`LlmError::Unavailable`], so the engine uses its rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLlm;

impl Llm for NoLlm {
    fn complete(&self, _: &LlmRequest) -> Result<LlmResponse, LlmError> {
        Err(LlmError::Unavailable("no language model is configured".into()))
    }
}

/// Parses the JSON value a model meant, tolerating what models wrap around it: `<think>`
/// sections, code fences, and prose before or after. The error says what was wrong, quoting
/// the start of the text, so a caller can report it; nothing is ever guessed.
pub fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let mut body = text;
    // Reasoning models put their thoughts first; the answer follows the last closing tag.
    if let Some(end) = body.rfind("</think>") {
        body = &body[end + "</think>".len()..];
    }
    let body = body.trim();
    let mut last_error = None;
    for candidate in candidates(body) {
        match serde_json::from_str::<T>(candidate) {
            Ok(v) => return Ok(v),
            Err(e) => last_error = Some(e),
        }
    }
    let excerpt: String = text.chars().take(120).collect();
    Err(match last_error {
        Some(e) if body.contains(['{', '[']) => {
            format!("model output is not the expected JSON ({e}): {excerpt:?}")
        }
        _ => format!("model output holds no JSON: {excerpt:?}"),
    })
}

/// The texts worth trying, most likely first: the whole body, each fenced block, then each
/// balanced `{…}` or `[…]` span.
fn candidates(body: &str) -> Vec<&str> {
    let mut out = vec![body];
    let mut rest = body;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        // Skip a language tag such as ```json.
        let content_start = after.find('\n').map_or(0, |i| i + 1);
        let Some(end) = after[content_start..].find("```") else { break };
        out.push(after[content_start..content_start + end].trim());
        rest = &after[content_start + end + 3..];
    }
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b'{' | b'[') {
            if let Some(end) = balanced_end(&body[i..]) {
                out.push(&body[i..i + end]);
                i += end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The length of the balanced JSON object or array at the start of `s`, strings respected.
fn balanced_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Answer {
        score: u8,
    }

    #[test]
    fn json_is_found_inside_fences_thoughts_and_prose() {
        for text in [
            r#"{"score": 7}"#,
            "```json\n{\"score\": 7}\n```",
            "<think>the user wants {\"score\": 1}?</think>\n{\"score\": 7}",
            "Sure! Here is the answer: {\"score\": 7} Hope that helps.",
            "Here: ```\n{\"score\": 7}\n``` done",
        ] {
            assert_eq!(parse_json::<Answer>(text), Ok(Answer { score: 7 }), "{text}");
        }
    }

    #[test]
    fn unusable_output_is_an_error_that_quotes_it() {
        let err = parse_json::<Answer>("I cannot answer that.").unwrap_err();
        assert!(err.contains("holds no JSON") && err.contains("I cannot"), "{err}");
        let err = parse_json::<Answer>("{\"score\": \"high\"}").unwrap_err();
        assert!(err.contains("not the expected JSON"), "{err}");
        let err = parse_json::<Answer>("{\"score\": 7").unwrap_err();
        assert!(err.contains("not the expected JSON"), "{err}");
    }
}
