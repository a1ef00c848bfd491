//! The language model over outgoing wasi:http: the OpenAI chat-completions protocol of
//! `hindsight_types::openai` (the native host's, with its retries, timeouts and JSON modes),
//! configured by the same `HINDSIGHT_LLM_*` variables. Without a URL the engine has no model and
//! uses its rules.

use std::io::Read;
use std::time::Duration;

use hindsight_types::openai::{self, Config, Post, Reply, Transport, Unsent};
use hindsight_types::{FieldError, Llm, LlmError, LlmRequest, LlmResponse};
use wasi::clocks::monotonic_clock;
use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme};

/// The largest answer read (a chat completion is a few kilobytes).
const MAX_ANSWER: u64 = 16 << 20;

/// The configured model, or why its configuration is unusable: a malformed variable fails every
/// call with the variable's name instead of silently running without a model.
pub struct HttpLlm(Result<Config, FieldError>);

impl HttpLlm {
    /// None without `HINDSIGHT_LLM_URL`.
    pub fn from_env() -> Option<HttpLlm> {
        match Config::from_env(|name| std::env::var(name).ok()) {
            Ok(config) => config.map(|c| HttpLlm(Ok(c))),
            Err(e) => Some(HttpLlm(Err(e))),
        }
    }
}

impl Llm for HttpLlm {
    fn complete(&self, r: &LlmRequest) -> Result<LlmResponse, LlmError> {
        match &self.0 {
            Ok(config) => openai::complete(config, &WasiHttp, r),
            Err(e) => Err(LlmError::Failed(format!("the LLM configuration: {e}"))),
        }
    }
}

struct WasiHttp;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Transport for WasiHttp {
    fn post(&self, &Post { url, headers, body, timeout }: &Post<'_>) -> Result<Reply, Unsent> {
        let started = monotonic_clock::now();
        let timed_out = || monotonic_clock::now().saturating_sub(started) >= nanos(timeout);
        let (scheme, rest) = match url.split_once("://") {
            Some(("https", rest)) => (Scheme::Https, rest),
            Some((_, rest)) => (Scheme::Http, rest),
            None => (Scheme::Http, url),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        // A length, not chunked encoding: not every OpenAI-compatible server reads chunked bodies.
        let mut fields: Vec<(String, Vec<u8>)> =
            headers.iter().map(|(k, v)| (k.to_string(), v.clone().into_bytes())).collect();
        fields.push(("content-length".into(), body.len().to_string().into_bytes()));
        let fields = Fields::from_list(&fields).map_err(|e| Unsent::Failed(format!("headers: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        let _ = request.set_method(&Method::Post);
        let _ = request.set_scheme(Some(&scheme));
        request
            .set_authority(Some(authority))
            .map_err(|()| Unsent::Failed(format!("authority {authority:?}")))?;
        request.set_path_with_query(Some(path)).map_err(|()| Unsent::Failed(format!("path {path:?}")))?;
        // A host that does not take an option keeps its own; the clock below still tells a
        // timeout from another failure.
        let options = RequestOptions::new();
        let _ = options.set_connect_timeout(Some(nanos(timeout)));
        let _ = options.set_first_byte_timeout(Some(nanos(timeout)));
        let _ = options.set_between_bytes_timeout(Some(nanos(timeout)));
        let outgoing = request.body().map_err(|()| Unsent::Failed("request body".into()))?;
        // Sent first, then written: the host buffers little of a body before the request goes.
        let future =
            outgoing_handler::handle(request, Some(options)).map_err(|e| Unsent::Failed(format!("{e:?}")))?;
        let sent = (|| {
            let stream = outgoing.write().map_err(|()| "request body".to_string())?;
            for chunk in body.as_bytes().chunks(4096) {
                stream.blocking_write_and_flush(chunk).map_err(|e| format!("sending: {e:?}"))?;
            }
            drop(stream);
            OutgoingBody::finish(outgoing, None).map_err(|e| format!("sending: {e:?}"))
        })();
        future.subscribe().block();
        let failed = |code: ErrorCode| match code {
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::HttpResponseTimeout => Unsent::TimedOut,
            _ if timed_out() => Unsent::TimedOut,
            code => Unsent::Failed(format!("{code:?}")),
        };
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(failed(code)),
            // A refused connection breaks the body's stream: the request's own error says why.
            _ => return Err(Unsent::Failed(sent.err().unwrap_or_else(|| "no response".into()))),
        };
        if let Err(e) = sent {
            return Err(Unsent::Failed(e));
        }
        let status = response.status();
        let retry_after =
            response.headers().get("retry-after").into_iter().next().and_then(|v| String::from_utf8(v).ok());
        let incoming = response.consume().map_err(|()| Unsent::Failed("response body".into()))?;
        let mut bytes = Vec::new();
        {
            let mut stream = incoming.stream().map_err(|()| Unsent::Failed("response body".into()))?;
            if let Err(e) = (&mut stream).take(MAX_ANSWER).read_to_end(&mut bytes) {
                return Err(if timed_out() {
                    Unsent::TimedOut
                } else {
                    Unsent::Failed(format!("reading: {e}"))
                });
            }
        }
        Ok(Reply { status, retry_after, body: String::from_utf8_lossy(&bytes).into_owned() })
    }

    fn sleep(&self, duration: Duration) {
        monotonic_clock::subscribe_duration(nanos(duration)).block();
    }
}
