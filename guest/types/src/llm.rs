//! The language model a host lends the engine: one completion call, and what it can answer.

use std::fmt;

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
