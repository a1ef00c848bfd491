//! A language model behind any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama,
//! llama.cpp's server, vLLM), sent with ureq. The protocol itself (timeouts, bounded retries on
//! 429 and 5xx with backoff honouring `Retry-After`, structured output where the server takes it,
//! tolerant reading of answers) is `hindsight_types::openai`, which the edge speaks too.

use std::time::Duration;

use hindsight_types::openai::{self, Config, Post, Reply, Transport, Unsent};
use hindsight_types::{Llm, LlmError, LlmOperation, LlmRequest, LlmResponse};

use crate::Result;

pub use hindsight_types::openai::{
    JsonMode, DEFAULT_BACKOFF, DEFAULT_RETRIES, DEFAULT_TIMEOUT, ENV_URL, MAX_BACKOFF,
};

/// An OpenAI-compatible chat-completions client.
#[derive(Clone)]
pub struct OpenAi {
    config: Config,
    agent: ureq::Agent,
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OpenAi").field(&self.config).finish()
    }
}

impl OpenAi {
    /// A client for the API base `url` (`http://127.0.0.1:8080/v1`, or the full
    /// `…/chat/completions` URL) asking `model`; 30 s timeout, 2 retries.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> OpenAi {
        OpenAi::with_config(Config::new(url, model))
    }

    fn with_config(config: Config) -> OpenAi {
        OpenAi { config, agent: ureq::AgentBuilder::new().build() }
    }

    /// From `HINDSIGHT_LLM_URL`, `_MODEL`, `_API_KEY`, `_MODEL_<OPERATION>`, `_TIMEOUT_MS`,
    /// `_RETRIES` and `_JSON_MODE`; none without a URL. A malformed value is an error naming it.
    pub fn from_env() -> Result<Option<OpenAi>> {
        Ok(Config::from_env(env)?.map(OpenAi::with_config))
    }

    /// Whether the URL can be an endpoint at all (checked before any call, not retried).
    pub fn check(&self) -> Result<()> {
        Ok(self.config.check()?)
    }

    /// Applies the `HINDSIGHT_LLM_*` variables other than the URL on top of this client.
    pub fn apply_env(&mut self) -> Result<()> {
        Ok(self.config.apply_env(env)?)
    }

    /// Sends a different URL.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.config.url = url.into();
        self
    }

    /// Asks a different model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.config.model = model.into();
        self
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.config.api_key = Some(key.into());
        self
    }

    /// Asks `model` for this operation only.
    pub fn model_for(mut self, operation: LlmOperation, model: impl Into<String>) -> Self {
        self.config.model_by_operation.insert(operation, model.into());
        self
    }

    /// Gives up on one attempt after this long.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.config.timeout = timeout;
        self
    }

    /// Retries after the first attempt (on 429, 5xx and network errors).
    pub fn retries(mut self, retries: u32) -> Self {
        self.config.retries = retries;
        self
    }

    /// The first retry waits this long, each next one twice as long (or what `Retry-After`
    /// says), at most 8 s.
    pub fn backoff(mut self, first: Duration) -> Self {
        self.config.backoff = first;
        self
    }

    /// How to ask for JSON.
    pub fn json_mode(mut self, mode: JsonMode) -> Self {
        self.config.json_mode = mode;
        self
    }

    /// The endpoint, without any credentials in it (for messages).
    pub fn endpoint(&self) -> String {
        self.config.shown_endpoint()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Llm for OpenAi {
    fn complete(&self, r: &LlmRequest) -> std::result::Result<LlmResponse, LlmError> {
        openai::complete(&self.config, self, r)
    }
}

impl Transport for OpenAi {
    fn post(&self, &Post { url, headers, body, timeout }: &Post<'_>) -> std::result::Result<Reply, Unsent> {
        let started = std::time::Instant::now();
        let mut call = self.agent.post(url).timeout(timeout);
        for (name, value) in headers {
            call = call.set(name, value);
        }
        let (status, response) = match call.send_string(body) {
            Ok(response) => (response.status(), response),
            Err(ureq::Error::Status(status, response)) => (status, response),
            Err(ureq::Error::Transport(t)) => {
                // ureq reports its timeout as an I/O error of the network kind: say what it was.
                if started.elapsed() >= timeout {
                    return Err(Unsent::TimedOut);
                }
                return Err(Unsent::Failed(
                    t.message().map(str::to_string).unwrap_or_else(|| t.kind().to_string()),
                ));
            }
        };
        let retry_after = response.header("Retry-After").map(str::to_string);
        let body = response.into_string().map_err(|e| Unsent::Failed(format!("reading the answer: {e}")))?;
        Ok(Reply { status, retry_after, body })
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_a_message() {
        let client = OpenAi::new("http://user:secret@h:1/v1", "m");
        assert_eq!(client.endpoint(), "http://h:1/v1/chat/completions");
        assert!(!format!("{client:?}").contains("secret"));
    }
}
