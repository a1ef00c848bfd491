//! The OpenAI chat-completions protocol with no transport of its own: what a request carries,
//! how an answer is read, which failures are asked again and how long to wait. The native host
//! sends it with ureq, the edge over outgoing wasi:http; both go through [`complete`], so one set
//! of transcripts (`tests/conformance/llm.json`) pins them both.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::FieldError;
use crate::llm::{LlmError, LlmRequest, LlmResponse};
use crate::names::{LlmOperation, Named};

/// The API base (`http://127.0.0.1:8080/v1`) or the full `…/chat/completions` URL.
pub const ENV_URL: &str = "HINDSIGHT_LLM_URL";
/// The model asked unless an operation names its own.
pub const ENV_MODEL: &str = "HINDSIGHT_LLM_MODEL";
/// Sent as `Authorization: Bearer …`.
pub const ENV_API_KEY: &str = "HINDSIGHT_LLM_API_KEY";
/// One request's timeout in milliseconds.
pub const ENV_TIMEOUT_MS: &str = "HINDSIGHT_LLM_TIMEOUT_MS";
/// Retries after the first attempt.
pub const ENV_RETRIES: &str = "HINDSIGHT_LLM_RETRIES";
/// `json_schema`, `json_object` or `none`.
pub const ENV_JSON_MODE: &str = "HINDSIGHT_LLM_JSON_MODE";
/// Followed by an operation in capitals (`HINDSIGHT_LLM_MODEL_EXTRACT`): that operation's model.
pub const ENV_MODEL_PREFIX: &str = "HINDSIGHT_LLM_MODEL_";

/// One request's timeout unless set (every host's default: tests/conformance/defaults.json).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries after the first attempt unless set.
pub const DEFAULT_RETRIES: u32 = 2;
/// The first retry's wait; each next one doubles, up to [`MAX_BACKOFF`].
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between tries (a larger `Retry-After` is cut to it).
pub const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// The model name sent when none is configured.
pub const DEFAULT_MODEL: &str = "default";

/// How to ask for JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonMode {
    /// `response_format: json_schema` with the engine's schema (the default).
    #[default]
    Schema,
    /// `response_format: json_object`.
    Object,
    /// Not at all: the prompt alone asks, and the engine parses tolerantly.
    None,
}

impl JsonMode {
    /// `json_schema` (or `schema`), `json_object` (or `object`) or `none`.
    pub fn parse(text: &str) -> Result<JsonMode, FieldError> {
        match text.trim() {
            "json_schema" | "schema" => Ok(JsonMode::Schema),
            "json_object" | "object" => Ok(JsonMode::Object),
            "none" => Ok(JsonMode::None),
            other => Err(FieldError::new(
                "json_mode",
                format!("unknown value {other:?}; expected json_schema, json_object or none"),
            )),
        }
    }
}

/// Where to send and how: everything of a client but its transport.
#[derive(Clone, PartialEq)]
pub struct Config {
    /// The API base or the full chat-completions URL (may carry credentials; never shown).
    pub url: String,
    /// The model asked unless [`Config::model_by_operation`] names another.
    pub model: String,
    /// Sent as a bearer token.
    pub api_key: Option<String>,
    /// A model per operation (e.g. a bigger one for `extract`).
    pub model_by_operation: BTreeMap<LlmOperation, String>,
    /// One request's timeout.
    pub timeout: Duration,
    /// Retries after the first attempt, on 429, 5xx and transport failures.
    pub retries: u32,
    /// The first retry's wait; each next one doubles.
    pub backoff: Duration,
    /// The longest wait between tries.
    pub max_backoff: Duration,
    /// How to ask for JSON.
    pub json_mode: JsonMode,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact(&self.url))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("json_mode", &self.json_mode)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// A client of `url` asking `model`, with every other value at its default.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Config {
        Config {
            url: url.into(),
            model: model.into(),
            api_key: None,
            model_by_operation: BTreeMap::new(),
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
            backoff: DEFAULT_BACKOFF,
            max_backoff: MAX_BACKOFF,
            json_mode: JsonMode::Schema,
        }
    }

    /// From the `HINDSIGHT_LLM_*` variables as `var` reads them; none without a URL. A
    /// malformed value is an error naming the variable.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, FieldError> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let Some(url) = var(ENV_URL) else { return Ok(None) };
        let mut config = Config::new(url, DEFAULT_MODEL);
        config.apply_env(var)?;
        config.check()?;
        Ok(Some(config))
    }

    /// Applies the `HINDSIGHT_LLM_*` variables other than the URL on top of this config.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) -> Result<(), FieldError> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if let Some(model) = var(ENV_MODEL) {
            self.model = model;
        }
        if let Some(key) = var(ENV_API_KEY) {
            self.api_key = Some(key);
        }
        for op in LlmOperation::ALL {
            if let Some(model) = var(&format!("{ENV_MODEL_PREFIX}{}", op.as_str().to_uppercase())) {
                self.model_by_operation.insert(*op, model);
            }
        }
        if let Some(t) = var(ENV_TIMEOUT_MS) {
            let ms: u64 = t
                .trim()
                .parse()
                .map_err(|_| FieldError::new(ENV_TIMEOUT_MS, format!("{t:?} is not a number")))?;
            self.timeout = Duration::from_millis(ms);
        }
        if let Some(r) = var(ENV_RETRIES) {
            self.retries = r
                .trim()
                .parse()
                .map_err(|_| FieldError::new(ENV_RETRIES, format!("{r:?} is not a number")))?;
        }
        if let Some(m) = var(ENV_JSON_MODE) {
            self.json_mode = JsonMode::parse(&m).map_err(|_| {
                FieldError::new(ENV_JSON_MODE, format!("{m:?}: expected json_schema, json_object or none"))
            })?;
        }
        Ok(())
    }

    /// Whether the URL can be an endpoint at all (checked before any call, not retried).
    pub fn check(&self) -> Result<(), FieldError> {
        let url = self.url.trim();
        let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
            _ => Err(FieldError::new(
                "llm url",
                format!("{:?} is not an http(s) URL, e.g. http://127.0.0.1:8080/v1", redact(url)),
            )),
        }
    }

    /// The chat-completions URL requests go to, credentials included.
    pub fn endpoint(&self) -> String {
        let base = self.url.trim().trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        }
    }

    /// The endpoint without any credentials in it (for messages).
    pub fn shown_endpoint(&self) -> String {
        redact(&self.endpoint())
    }

    /// The headers every request carries (names in lower case).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("content-type", "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        headers
    }

    /// The JSON body asking `request`, in `mode`.
    pub fn body(&self, request: &LlmRequest, mode: JsonMode) -> String {
        let model = self.model_by_operation.get(&request.operation).unwrap_or(&self.model);
        let mut body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt},
            ],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        });
        match (mode, &request.json_schema) {
            (JsonMode::Schema, Some(schema)) => {
                if let Ok(schema) = serde_json::from_str::<Value>(schema) {
                    body["response_format"] = json!({
                        "type": "json_schema",
                        "json_schema": {"name": request.operation.as_str(), "schema": schema, "strict": false},
                    });
                }
            }
            (JsonMode::Object, Some(_)) => body["response_format"] = json!({"type": "json_object"}),
            _ => {}
        }
        body.to_string()
    }
}

/// `http://user:secret@host/…` → `http://host/…`: credentials never reach a message.
pub fn redact(url: &str) -> String {
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

/// What came back of one POST, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The `Retry-After` header's value, if there was one.
    pub retry_after: Option<String>,
    /// The body as text.
    pub body: String,
}

/// Why a POST brought no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsent {
    /// Nothing came within the timeout.
    TimedOut,
    /// Anything else (refused, reset, unreadable), in the transport's words.
    Failed(String),
}

/// One POST of a chat completion: where, with which headers and body, and how long to wait.
pub struct Post<'a> {
    /// The endpoint, `…/chat/completions`.
    pub url: &'a str,
    /// Content type and, with a key, the authorisation header.
    pub headers: &'a [(&'a str, String)],
    /// The JSON request.
    pub body: &'a str,
    /// When to give up on this try.
    pub timeout: Duration,
}

/// What carries a request: one POST and a way to wait.
pub trait Transport {
    /// Sends `post`, giving up after its timeout.
    fn post(&self, post: &Post<'_>) -> Result<Reply, Unsent>;
    /// Waits `duration` before the next try.
    fn sleep(&self, duration: Duration);
}

/// One completion over `transport`: asks again without `response_format` when a server refuses
/// it, retries 429, 5xx and transport failures with doubling backoff (honouring `Retry-After`),
/// and reads the first choice's text.
pub fn complete(
    config: &Config,
    transport: &dyn Transport,
    request: &LlmRequest,
) -> Result<LlmResponse, LlmError> {
    let endpoint = config.endpoint();
    let shown = redact(&endpoint);
    let headers = config.headers();
    let mut mode = config.json_mode;
    let mut attempt = 0u32;
    // The importance score is optional (the rules decide without it): one try, so a hanging
    // server costs a retain one timeout, not several.
    let retries = if request.operation == LlmOperation::Importance { 0 } else { config.retries };
    loop {
        let body = config.body(request, mode);
        let (message, retry_after) = match transport.post(&Post {
            url: &endpoint,
            headers: &headers,
            body: &body,
            timeout: config.timeout,
        }) {
            Ok(reply) if (200..300).contains(&reply.status) => {
                return answer(&reply.body, request.max_tokens, request.json_schema.is_some())
            }
            Ok(reply) if reply.status == 400 && mode != JsonMode::None => {
                // A server that does not take response_format: ask again without it.
                if reply.body.contains("response_format") || reply.body.contains("json_schema") {
                    mode = JsonMode::None;
                    continue;
                }
                return Err(LlmError::Failed(format!("HTTP 400 from {shown}: {}", excerpt(&reply.body))));
            }
            Ok(reply) => {
                let message = format!("HTTP {} from {shown}: {}", reply.status, excerpt(&reply.body));
                if reply.status != 429 && reply.status < 500 {
                    return Err(LlmError::Failed(message));
                }
                let retry_after = reply
                    .retry_after
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(Duration::from_secs_f64);
                (message, retry_after)
            }
            Err(Unsent::TimedOut) => (
                format!(
                    "{shown}: no answer within the timeout of {} ms ({ENV_TIMEOUT_MS})",
                    config.timeout.as_millis()
                ),
                None,
            ),
            Err(Unsent::Failed(detail)) => (format!("{shown}: {detail}"), None),
        };
        if attempt >= retries {
            let tries = if attempt == 0 { "1 try".to_string() } else { format!("{} tries", attempt + 1) };
            return Err(LlmError::Failed(format!("{message} (after {tries})")));
        }
        let backoff =
            retry_after.unwrap_or(config.backoff * 2u32.saturating_pow(attempt)).min(config.max_backoff);
        transport.sleep(backoff);
        attempt += 1;
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
fn answer(text: &str, max_tokens: u32, wants_json: bool) -> Result<LlmResponse, LlmError> {
    let completion: Completion = serde_json::from_str(text).map_err(|e| {
        LlmError::Failed(format!("the answer is not a chat completion ({e}): {}", excerpt(text)))
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
    use std::cell::RefCell;

    use super::*;

    /// Replies in order and records what was sent and how long it waited.
    struct Scripted {
        replies: RefCell<Vec<Result<Reply, Unsent>>>,
        sent: RefCell<Vec<String>>,
        slept: RefCell<Vec<Duration>>,
    }

    impl Scripted {
        fn new(mut replies: Vec<Result<Reply, Unsent>>) -> Scripted {
            replies.reverse();
            Scripted { replies: RefCell::new(replies), sent: RefCell::default(), slept: RefCell::default() }
        }
    }

    impl Transport for Scripted {
        fn post(&self, post: &Post<'_>) -> Result<Reply, Unsent> {
            self.sent.borrow_mut().push(post.body.to_string());
            self.replies.borrow_mut().pop().expect("a request past the script")
        }
        fn sleep(&self, duration: Duration) {
            self.slept.borrow_mut().push(duration);
        }
    }

    fn request() -> LlmRequest {
        LlmRequest {
            operation: LlmOperation::Extract,
            system: "s".into(),
            prompt: "p".into(),
            json_schema: Some("{\"type\":\"object\"}".into()),
            max_tokens: 10,
            temperature: 0.0,
        }
    }

    fn status(status: u16, retry_after: Option<&str>) -> Result<Reply, Unsent> {
        Ok(Reply { status, retry_after: retry_after.map(String::from), body: "{}".into() })
    }

    #[test]
    fn waits_double_are_capped_and_retry_after_wins() {
        let ok = Ok(Reply {
            status: 200,
            retry_after: None,
            body: r#"{"choices":[{"message":{"content":"hi"}}]}"#.into(),
        });
        let transport = Scripted::new(vec![
            status(500, None),
            Err(Unsent::TimedOut),
            status(429, Some("60")),
            status(503, Some("0.25")),
            ok,
        ]);
        let mut config = Config::new("http://h/v1", "m");
        config.retries = 4;
        config.backoff = Duration::from_millis(100);
        config.max_backoff = Duration::from_secs(2);
        assert_eq!(complete(&config, &transport, &request()).unwrap().text, "hi");
        assert_eq!(
            *transport.slept.borrow(),
            [100, 200, 2000, 250].map(Duration::from_millis).to_vec(),
            "doubling, then Retry-After cut to the cap, then Retry-After as sent"
        );
    }

    #[test]
    fn a_timeout_says_which_and_the_tries() {
        let transport = Scripted::new(vec![Err(Unsent::TimedOut), Err(Unsent::TimedOut)]);
        let mut config = Config::new("http://u:secret@h/v1", "m");
        config.retries = 1;
        config.timeout = Duration::from_millis(300);
        let Err(LlmError::Failed(message)) = complete(&config, &transport, &request()) else { panic!() };
        assert!(message.contains("timeout of 300 ms") && message.contains("after 2 tries"), "{message}");
        assert!(!message.contains("secret"), "{message}");
    }

    #[test]
    fn the_environment_is_read_and_a_bad_value_named() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(Config::from_env(env(&[])).unwrap(), None);
        let config = Config::from_env(env(&[
            (ENV_URL, "http://h:1/v1/"),
            ("HINDSIGHT_LLM_MODEL_EXTRACT", "big"),
            (ENV_RETRIES, "5"),
            (ENV_JSON_MODE, "none"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(config.endpoint(), "http://h:1/v1/chat/completions");
        assert_eq!((config.model.as_str(), config.retries, config.json_mode), ("default", 5, JsonMode::None));
        assert_eq!(config.model_by_operation[&LlmOperation::Extract], "big");
        let e = Config::from_env(env(&[(ENV_URL, "http://h"), (ENV_TIMEOUT_MS, "soon")])).unwrap_err();
        assert_eq!(e.field, ENV_TIMEOUT_MS);
        assert_eq!(Config::from_env(env(&[(ENV_URL, "ftp://h")])).unwrap_err().field, "llm url");
    }

    #[test]
    fn credentials_never_reach_a_message() {
        assert_eq!(redact("http://user:pw@127.0.0.1:8080/v1"), "http://127.0.0.1:8080/v1");
        assert_eq!(redact("https://api.example.com/v1"), "https://api.example.com/v1");
        let config = Config::new("http://user:secret@h:1/v1", "m");
        assert_eq!(config.shown_endpoint(), "http://h:1/v1/chat/completions");
        assert!(!format!("{config:?}").contains("secret"));
    }
}
