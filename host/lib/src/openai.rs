//! A language model behind any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama,
//! llama.cpp's server, vLLM): timeouts, bounded retries on 429 and 5xx with backoff (honouring
//! `Retry-After`), structured output where the server takes it, and tolerant reading of answers.

use std::collections::BTreeMap;
use std::time::Duration;

use hindsight_types::{Llm, LlmError, LlmOperation, LlmRequest, LlmResponse, Named};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{Error, Result};

/// How to ask for JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonMode {
    /// `response_format: json_schema` with the engine's schema (the default).
    Schema,
    /// `response_format: json_object`.
    Object,
    /// Not at all: the prompt alone asks, and the engine parses tolerantly.
    None,
}

impl JsonMode {
    /// `json_schema` (or `schema`), `json_object` (or `object`) or `none`.
    pub fn parse(text: &str) -> Result<JsonMode> {
        match text.trim() {
            "json_schema" | "schema" => Ok(JsonMode::Schema),
            "json_object" | "object" => Ok(JsonMode::Object),
            "none" => Ok(JsonMode::None),
            other => Err(Error::invalid(
                "json_mode",
                format!("unknown value {other:?}; expected json_schema, json_object or none"),
            )),
        }
    }
}

/// An OpenAI-compatible chat-completions client.
#[derive(Clone)]
pub struct OpenAi {
    url: String,
    model: String,
    api_key: Option<String>,
    model_by_operation: BTreeMap<LlmOperation, String>,
    timeout: Duration,
    retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    json_mode: JsonMode,
    agent: ureq::Agent,
}

impl std::fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAi")
            .field("url", &redact(&self.url))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

/// The environment variables [`OpenAi::from_env`] reads.
pub const ENV_URL: &str = "HINDSIGHT_LLM_URL";

/// One request's timeout unless set (every host's default: tests/conformance/defaults.json).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries after the first attempt unless set.
pub const DEFAULT_RETRIES: u32 = 2;
/// The first retry's wait; each next one doubles, up to [`MAX_BACKOFF`].
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between tries (a larger `Retry-After` is cut to it).
pub const MAX_BACKOFF: Duration = Duration::from_secs(8);

impl OpenAi {
    /// A client for the API base `url` (`http://127.0.0.1:8080/v1`, or the full
    /// `…/chat/completions` URL) asking `model`; 30 s timeout, 2 retries.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> OpenAi {
        let timeout = DEFAULT_TIMEOUT;
        OpenAi {
            url: url.into(),
            model: model.into(),
            api_key: None,
            model_by_operation: BTreeMap::new(),
            timeout,
            retries: DEFAULT_RETRIES,
            backoff: DEFAULT_BACKOFF,
            max_backoff: MAX_BACKOFF,
            json_mode: JsonMode::Schema,
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
        }
    }

    /// From `HINDSIGHT_LLM_URL`, `_MODEL`, `_API_KEY`, `_MODEL_<OPERATION>`, `_TIMEOUT_MS`,
    /// `_RETRIES` and `_JSON_MODE`; none without a URL. A malformed value is an error naming it.
    pub fn from_env() -> Result<Option<OpenAi>> {
        let Some(url) = env(ENV_URL) else { return Ok(None) };
        let mut client = OpenAi::new(url, env("HINDSIGHT_LLM_MODEL").unwrap_or_else(|| "default".into()));
        client.apply_env()?;
        client.check()?;
        Ok(Some(client))
    }

    /// Whether the URL can be an endpoint at all (checked before any call, not retried).
    pub fn check(&self) -> Result<()> {
        let url = self.url.trim();
        let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
            _ => Err(Error::invalid(
                "llm url",
                format!("{:?} is not an http(s) URL, e.g. http://127.0.0.1:8080/v1", redact(url)),
            )),
        }
    }

    /// Applies the `HINDSIGHT_LLM_*` variables other than the URL on top of this client.
    pub fn apply_env(&mut self) -> Result<()> {
        if let Some(model) = env("HINDSIGHT_LLM_MODEL") {
            self.model = model;
        }
        if let Some(key) = env("HINDSIGHT_LLM_API_KEY") {
            self.api_key = Some(key);
        }
        for op in LlmOperation::ALL {
            if let Some(model) = env(&format!("HINDSIGHT_LLM_MODEL_{}", op.as_str().to_uppercase())) {
                self.model_by_operation.insert(*op, model);
            }
        }
        if let Some(t) = env("HINDSIGHT_LLM_TIMEOUT_MS") {
            let ms = t
                .parse()
                .map_err(|_| Error::invalid("HINDSIGHT_LLM_TIMEOUT_MS", format!("{t:?} is not a number")))?;
            *self = self.clone().timeout(Duration::from_millis(ms));
        }
        if let Some(r) = env("HINDSIGHT_LLM_RETRIES") {
            self.retries = r
                .parse()
                .map_err(|_| Error::invalid("HINDSIGHT_LLM_RETRIES", format!("{r:?} is not a number")))?;
        }
        if let Some(m) = env("HINDSIGHT_LLM_JSON_MODE") {
            self.json_mode = JsonMode::parse(&m).map_err(|_| {
                Error::invalid(
                    "HINDSIGHT_LLM_JSON_MODE",
                    format!("{m:?}: expected json_schema, json_object or none"),
                )
            })?;
        }
        Ok(())
    }

    /// Sends a different URL.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// Asks a different model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sends `Authorization: Bearer <key>`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Asks `model` for this operation only.
    pub fn model_for(mut self, operation: LlmOperation, model: impl Into<String>) -> Self {
        self.model_by_operation.insert(operation, model.into());
        self
    }

    /// Gives up on one attempt after this long.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.agent = ureq::AgentBuilder::new().timeout(timeout).build();
        self
    }

    /// Retries after the first attempt (on 429, 5xx and network errors).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The first retry waits this long, each next one twice as long (or what `Retry-After`
    /// says), at most 8 s.
    pub fn backoff(mut self, first: Duration) -> Self {
        self.backoff = first;
        self
    }

    /// How to ask for JSON.
    pub fn json_mode(mut self, mode: JsonMode) -> Self {
        self.json_mode = mode;
        self
    }

    /// The endpoint, without any credentials in it (for messages).
    pub fn endpoint(&self) -> String {
        redact(&self.endpoint_url())
    }

    fn endpoint_url(&self) -> String {
        let base = self.url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        }
    }

    fn body(&self, r: &LlmRequest, mode: JsonMode) -> Value {
        let model = self.model_by_operation.get(&r.operation).unwrap_or(&self.model);
        let mut body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": r.system},
                {"role": "user", "content": r.prompt},
            ],
            "max_tokens": r.max_tokens,
            "temperature": r.temperature,
        });
        match (mode, &r.json_schema) {
            (JsonMode::Schema, Some(schema)) => {
                if let Ok(schema) = serde_json::from_str::<Value>(schema) {
                    body["response_format"] = json!({
                        "type": "json_schema",
                        "json_schema": {"name": r.operation.as_str(), "schema": schema, "strict": false},
                    });
                }
            }
            (JsonMode::Object, Some(_)) => body["response_format"] = json!({"type": "json_object"}),
            _ => {}
        }
        body
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `http://user:secret@host/…` → `http://host/…`: credentials never reach a message.
fn redact(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://{host}{path}"),
                None => url.to_string(),
            }
        }
        None => url.to_string(),
    }
}

impl Llm for OpenAi {
    fn complete(&self, r: &LlmRequest) -> std::result::Result<LlmResponse, LlmError> {
        let endpoint = self.endpoint_url();
        let shown = redact(&endpoint);
        let mut mode = self.json_mode;
        let mut attempt = 0u32;
        // The importance score is optional (the rules decide without it): one try, so a hanging
        // server costs a retain one timeout, not several.
        let retries = if r.operation == LlmOperation::Importance { 0 } else { self.retries };
        loop {
            let started = std::time::Instant::now();
            let mut call = self.agent.post(&endpoint).set("Content-Type", "application/json");
            if let Some(key) = &self.api_key {
                call = call.set("Authorization", &format!("Bearer {key}"));
            }
            let (message, retry_after) = match call.send_json(self.body(r, mode)) {
                Ok(response) => return answer(response, r.max_tokens, r.json_schema.is_some()),
                Err(ureq::Error::Status(400, response)) if mode != JsonMode::None => {
                    // A server that does not take response_format: ask again without it.
                    let text = response.into_string().unwrap_or_default();
                    if text.contains("response_format") || text.contains("json_schema") {
                        mode = JsonMode::None;
                        continue;
                    }
                    return Err(LlmError::Failed(format!("HTTP 400 from {shown}: {}", excerpt(&text))));
                }
                Err(ureq::Error::Status(code, response)) => {
                    let retry_after = response
                        .header("Retry-After")
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .map(Duration::from_secs_f64);
                    let text = response.into_string().unwrap_or_default();
                    let message = format!("HTTP {code} from {shown}: {}", excerpt(&text));
                    if code == 429 || code >= 500 {
                        (message, retry_after)
                    } else {
                        return Err(LlmError::Failed(message));
                    }
                }
                Err(ureq::Error::Transport(t)) => {
                    let kind = t.kind();
                    let detail = t.message().map(str::to_string).unwrap_or_else(|| kind.to_string());
                    // ureq reports its timeout as an I/O error of the network kind: say what it was.
                    let detail = if started.elapsed() >= self.timeout {
                        format!(
                            "no answer within the timeout of {} ms (HINDSIGHT_LLM_TIMEOUT_MS)",
                            self.timeout.as_millis()
                        )
                    } else {
                        detail
                    };
                    (format!("{shown}: {detail}"), None)
                }
            };
            if attempt >= retries {
                let tries = if attempt == 0 { "1 try".to_string() } else { format!("{} tries", attempt + 1) };
                return Err(LlmError::Failed(format!("{message} (after {tries})")));
            }
            let backoff =
                retry_after.unwrap_or(self.backoff * 2u32.saturating_pow(attempt)).min(self.max_backoff);
            std::thread::sleep(backoff);
            attempt += 1;
        }
    }
}

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<TokenUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    /// Some servers put a reasoning model's answer here when `content` is empty.
    #[serde(default)]
    reasoning_content: Option<String>,
}

#[derive(Deserialize, Default)]
struct TokenUsage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
}

/// The first choice's text, or why it is unusable.
fn answer(
    response: ureq::Response,
    max_tokens: u32,
    wants_json: bool,
) -> std::result::Result<LlmResponse, LlmError> {
    let text = response.into_string().map_err(|e| LlmError::Failed(format!("reading the answer: {e}")))?;
    let completion: Completion = serde_json::from_str(&text).map_err(|e| {
        LlmError::Failed(format!("the answer is not a chat completion ({e}): {}", excerpt(&text)))
    })?;
    let usage = completion.usage.unwrap_or_default();
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(LlmError::Failed("the answer has no choices".into()));
    };
    let content = choice
        .message
        .content
        .filter(|c| !c.trim().is_empty())
        .or(choice.message.reasoning_content)
        .unwrap_or_default();
    if choice.finish_reason.as_deref() == Some("length") && wants_json {
        return Err(LlmError::Failed(format!(
            "the model's answer was cut off at max_tokens={max_tokens} (finish_reason \"length\"): {}",
            excerpt(&content)
        )));
    }
    if content.trim().is_empty() {
        return Err(LlmError::Failed("the model's answer is empty".into()));
    }
    Ok(LlmResponse {
        text: content,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
    })
}

fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(200).collect();
    format!("{t:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(redact("http://user:pw@127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
        assert_eq!(redact("https://api.example.com/v1"), "https://api.example.com/v1");
        let client = OpenAi::new("http://user:secret@h:1/v1", "m");
        assert_eq!(client.endpoint(), "http://h:1/v1/chat/completions");
        assert!(!format!("{client:?}").contains("secret"));
    }
}
