//! The `llm` import: any OpenAI-compatible chat-completions endpoint, with timeouts, bounded
//! retries on 429 and 5xx, structured output where the server takes it, and token usage
//! recorded in the store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::bindings::hindsight::memory::llm;
use crate::kv::{Kv, KvOp};

/// How to ask for JSON: a schema (`response_format: json_schema`), any JSON object
/// (`json_object`), or not at all (the prompt alone asks; the engine still parses tolerantly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonMode {
    Schema,
    Object,
    None,
}

impl JsonMode {
    pub fn parse(text: &str) -> anyhow::Result<JsonMode> {
        match text {
            "json_schema" | "schema" => Ok(JsonMode::Schema),
            "json_object" | "object" => Ok(JsonMode::Object),
            "none" => Ok(JsonMode::None),
            other => anyhow::bail!(
                "llm json mode: unknown value {other:?}; expected json_schema, json_object or none"
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// The API base (`http://127.0.0.1:8080/v1`) or the full `…/chat/completions` URL.
    pub url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// A different model per operation (`extract`, `importance`, `consolidate`, `conflict`).
    pub model_by_operation: BTreeMap<String, String>,
    pub timeout: Duration,
    /// Retries after the first try, on 429, 5xx and transport errors.
    pub max_retries: u32,
    /// The first retry waits this long, each next one twice as long (or what Retry-After says,
    /// up to `max_backoff`).
    pub backoff: Duration,
    pub max_backoff: Duration,
    pub json_mode: JsonMode,
}

impl LlmConfig {
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> LlmConfig {
        LlmConfig {
            url: url.into(),
            model: model.into(),
            api_key: None,
            model_by_operation: BTreeMap::new(),
            timeout: Duration::from_secs(30),
            max_retries: 2,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            json_mode: JsonMode::Schema,
        }
    }

    /// From `HINDSIGHT_LLM_*` variables (flags override them in the CLI); none without a URL.
    pub fn from_env() -> anyhow::Result<Option<LlmConfig>> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let Some(url) = var("HINDSIGHT_LLM_URL") else { return Ok(None) };
        let mut config = LlmConfig::new(url, var("HINDSIGHT_LLM_MODEL").unwrap_or_else(|| "default".into()));
        config.api_key = var("HINDSIGHT_LLM_API_KEY");
        for op in ["extract", "importance", "consolidate", "conflict"] {
            if let Some(model) = var(&format!("HINDSIGHT_LLM_MODEL_{}", op.to_uppercase())) {
                config.model_by_operation.insert(op.to_string(), model);
            }
        }
        if let Some(t) = var("HINDSIGHT_LLM_TIMEOUT_MS") {
            config.timeout = Duration::from_millis(
                t.parse().map_err(|_| anyhow::anyhow!("HINDSIGHT_LLM_TIMEOUT_MS: {t:?} is not a number"))?,
            );
        }
        if let Some(r) = var("HINDSIGHT_LLM_RETRIES") {
            config.max_retries =
                r.parse().map_err(|_| anyhow::anyhow!("HINDSIGHT_LLM_RETRIES: {r:?} is not a number"))?;
        }
        if let Some(m) = var("HINDSIGHT_LLM_JSON_MODE") {
            config.json_mode = JsonMode::parse(&m)?;
        }
        Ok(Some(config))
    }

    fn endpoint(&self) -> String {
        let base = self.url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        }
    }
}

/// Calls, failures and tokens of one operation, summed over the store's life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub calls: u64,
    pub failures: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

const USAGE_PREFIX: &str = "host/llm-usage/";

/// Token usage by operation, as recorded in the store.
pub fn usage(kv: &dyn Kv) -> anyhow::Result<BTreeMap<String, Usage>> {
    let mut out = BTreeMap::new();
    for (key, value) in kv.scan(USAGE_PREFIX, None, 1000)? {
        out.insert(key[USAGE_PREFIX.len()..].to_string(), serde_json::from_slice(&value)?);
    }
    Ok(out)
}

fn record_usage(kv: &dyn Kv, operation: &str, ok: bool, prompt: u32, completion: u32) -> anyhow::Result<()> {
    let key = format!("{USAGE_PREFIX}{operation}");
    let mut u: Usage = match kv.get(&key)? {
        Some(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
        None => Usage::default(),
    };
    u.calls += 1;
    u.failures += u64::from(!ok);
    u.prompt_tokens += u64::from(prompt);
    u.completion_tokens += u64::from(completion);
    kv.commit(vec![KvOp::Put(key, serde_json::to_vec(&u)?)])
}

pub struct LlmClient {
    config: LlmConfig,
    agent: ureq::Agent,
    kv: Arc<dyn Kv>,
}

impl LlmClient {
    pub fn new(config: LlmConfig, kv: Arc<dyn Kv>) -> LlmClient {
        let agent = ureq::AgentBuilder::new().timeout(config.timeout).build();
        LlmClient { config, agent, kv }
    }

    /// One completion; every attempt's outcome and tokens are recorded.
    pub fn complete(&self, request: &llm::Request) -> Result<llm::Response, llm::LlmError> {
        let (result, (p, c)) = self.complete_with_retries(request);
        // Usage accounting must never fail the call itself. Tokens count even when the answer
        // was unusable (cut off): they were spent.
        let _ = record_usage(&*self.kv, &request.operation, result.is_ok(), p, c);
        result
    }

    fn body(&self, r: &llm::Request, mode: JsonMode) -> Value {
        let model = self.config.model_by_operation.get(&r.operation).unwrap_or(&self.config.model);
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
                        "json_schema": {"name": r.operation, "schema": schema, "strict": false},
                    });
                }
            }
            (JsonMode::Object, Some(_)) => body["response_format"] = json!({"type": "json_object"}),
            _ => {}
        }
        body
    }

    /// The outcome and the tokens the server reported spending on it.
    fn complete_with_retries(&self, r: &llm::Request) -> (Result<llm::Response, llm::LlmError>, (u32, u32)) {
        let endpoint = self.config.endpoint();
        let mut mode = self.config.json_mode;
        let mut attempt = 0u32;
        loop {
            let mut call = self.agent.post(&endpoint).set("Content-Type", "application/json");
            if let Some(key) = &self.config.api_key {
                call = call.set("Authorization", &format!("Bearer {key}"));
            }
            let failure = match call.send_json(self.body(r, mode)) {
                Ok(response) => return parse_response(response, r.max_tokens, r.json_schema.is_some()),
                Err(ureq::Error::Status(400, response)) if mode != JsonMode::None => {
                    // A server that does not take response_format: ask again without it.
                    let text = response.into_string().unwrap_or_default();
                    if text.contains("response_format") || text.contains("json_schema") {
                        mode = JsonMode::None;
                        continue;
                    }
                    let message = format!("HTTP 400 from {endpoint}: {}", excerpt(&text));
                    return (Err(llm::LlmError::Failed(message)), (0, 0));
                }
                Err(ureq::Error::Status(code, response)) => {
                    let retry_after = response
                        .header("Retry-After")
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .map(Duration::from_secs_f64);
                    let text = response.into_string().unwrap_or_default();
                    let message = format!("HTTP {code} from {endpoint}: {}", excerpt(&text));
                    if code == 429 || code >= 500 {
                        (message, retry_after)
                    } else {
                        return (Err(llm::LlmError::Failed(message)), (0, 0));
                    }
                }
                Err(ureq::Error::Transport(t)) => (format!("{endpoint}: {t}"), None),
            };
            let (message, retry_after) = failure;
            if attempt >= self.config.max_retries {
                return (
                    Err(llm::LlmError::Failed(format!("{message} (after {} tries)", attempt + 1))),
                    (0, 0),
                );
            }
            let backoff = retry_after
                .unwrap_or(self.config.backoff * 2u32.saturating_pow(attempt))
                .min(self.config.max_backoff);
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

fn parse_response(
    response: ureq::Response,
    max_tokens: u32,
    wants_json: bool,
) -> (Result<llm::Response, llm::LlmError>, (u32, u32)) {
    let text = match response.into_string() {
        Ok(t) => t,
        Err(e) => return (Err(llm::LlmError::Failed(format!("reading the answer: {e}"))), (0, 0)),
    };
    let completion: Completion = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => {
            let message = format!("the answer is not a chat completion ({e}): {}", excerpt(&text));
            return (Err(llm::LlmError::Failed(message)), (0, 0));
        }
    };
    let usage = completion.usage.unwrap_or_default();
    let tokens = (usage.prompt_tokens, usage.completion_tokens);
    (answer(completion.choices, usage, max_tokens, wants_json), tokens)
}

/// The first choice's text, or why it is unusable.
fn answer(
    choices: Vec<Choice>,
    usage: TokenUsage,
    max_tokens: u32,
    wants_json: bool,
) -> Result<llm::Response, llm::LlmError> {
    let Some(choice) = choices.into_iter().next() else {
        return Err(llm::LlmError::Failed("the answer has no choices".into()));
    };
    let content = choice
        .message
        .content
        .filter(|c| !c.trim().is_empty())
        .or(choice.message.reasoning_content)
        .unwrap_or_default();
    if choice.finish_reason.as_deref() == Some("length") && wants_json {
        return Err(llm::LlmError::Failed(format!(
            "the model's answer was cut off at max_tokens={max_tokens} (finish_reason \"length\"): {}",
            excerpt(&content)
        )));
    }
    if content.trim().is_empty() {
        return Err(llm::LlmError::Failed("the model's answer is empty".into()));
    }
    Ok(llm::Response {
        text: content,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
    })
}

fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(200).collect();
    format!("{t:?}")
}
