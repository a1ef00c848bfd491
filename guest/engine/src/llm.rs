//! The language model the host lends; its protocol, and reading JSON out of what a model says,
//! live in `hindsight_types` (the host reads answers the same way when it counts failures).

pub use hindsight_types::llm::parse_json;
pub use hindsight_types::{Llm, LlmError, LlmOperation, LlmRequest, LlmResponse, NoLlm};
