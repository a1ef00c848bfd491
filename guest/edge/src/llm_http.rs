//! The language model over outgoing wasi:http: an OpenAI-compatible chat-completions endpoint
//! named by `HINDSIGHT_LLM_URL` (and `HINDSIGHT_LLM_MODEL`, `HINDSIGHT_LLM_API_KEY`), the
//! variables the native hosts read. Without a URL the engine has no model and uses its rules.

use std::io::Read;

use hindsight_types::{Llm, LlmError, LlmRequest, LlmResponse, Named};
use serde_json::{json, Value};
use wasi::http::outgoing_handler;
use wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};

pub struct HttpLlm {
    scheme: Scheme,
    authority: String,
    path: String,
    model: String,
    api_key: Option<String>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl HttpLlm {
    pub fn from_env() -> Option<HttpLlm> {
        let url = env("HINDSIGHT_LLM_URL")?;
        let (scheme, rest) = match url.trim().split_once("://") {
            Some(("https", rest)) => (Scheme::Https, rest.to_string()),
            Some((_, rest)) => (Scheme::Http, rest.to_string()),
            None => (Scheme::Http, url.trim().to_string()),
        };
        let (authority, base) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let base = base.trim_end_matches('/');
        let path = if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        };
        Some(HttpLlm {
            scheme,
            authority: authority.to_string(),
            path,
            model: env("HINDSIGHT_LLM_MODEL").unwrap_or_else(|| "default".into()),
            api_key: env("HINDSIGHT_LLM_API_KEY"),
        })
    }

    fn post(&self, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        // A length, not chunked encoding: not every OpenAI-compatible server reads chunked bodies.
        let mut headers = vec![
            ("content-type".to_string(), b"application/json".to_vec()),
            ("content-length".to_string(), body.len().to_string().into_bytes()),
        ];
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_string(), format!("Bearer {key}").into_bytes()));
        }
        let fields = Fields::from_list(&headers).map_err(|e| format!("headers: {e:?}"))?;
        let request = OutgoingRequest::new(fields);
        let _ = request.set_method(&Method::Post);
        let _ = request.set_scheme(Some(&self.scheme));
        request
            .set_authority(Some(&self.authority))
            .map_err(|()| format!("authority {:?}", self.authority))?;
        request.set_path_with_query(Some(&self.path)).map_err(|()| format!("path {:?}", self.path))?;
        let outgoing = request.body().map_err(|()| "request body".to_string())?;
        // Sent first, then written: the host buffers little of a body before the request goes.
        let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
        let sent = (|| {
            let stream = outgoing.write().map_err(|()| "request body".to_string())?;
            for chunk in body.chunks(4096) {
                stream.blocking_write_and_flush(chunk).map_err(|e| format!("sending: {e:?}"))?;
            }
            drop(stream);
            OutgoingBody::finish(outgoing, None).map_err(|e| format!("sending: {e:?}"))
        })();
        future.subscribe().block();
        if let Err(e) = sent {
            // A refused connection breaks the body's stream: the request's own error says why.
            return Err(match future.get() {
                Some(Ok(Err(code))) => format!("{code:?}"),
                _ => e,
            });
        }
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(e))) => return Err(format!("{e:?}")),
            _ => return Err("no response".into()),
        };
        let status = response.status();
        let incoming = response.consume().map_err(|()| "response body".to_string())?;
        let mut bytes = Vec::new();
        {
            let mut stream = incoming.stream().map_err(|()| "response body".to_string())?;
            (&mut stream).take(16 << 20).read_to_end(&mut bytes).map_err(|e| format!("reading: {e}"))?;
        }
        Ok((status, bytes))
    }
}

impl Llm for HttpLlm {
    fn complete(&self, r: &LlmRequest) -> Result<LlmResponse, LlmError> {
        let mut body = json!({
            "model": self.model,
            "messages": [{"role": "system", "content": r.system}, {"role": "user", "content": r.prompt}],
            "max_tokens": r.max_tokens,
            "temperature": r.temperature,
        });
        if let Some(schema) = r.json_schema.as_deref().and_then(|s| serde_json::from_str::<Value>(s).ok()) {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": r.operation.as_str(), "schema": schema, "strict": false},
            });
        }
        let shown = format!("{}{}", self.authority, self.path);
        let (status, bytes) =
            self.post(body.to_string().as_bytes()).map_err(|e| LlmError::Failed(format!("{shown}: {e}")))?;
        let text = String::from_utf8_lossy(&bytes);
        if status != 200 {
            let excerpt: String = text.chars().take(300).collect();
            return Err(LlmError::Failed(format!("HTTP {status} from {shown}: {excerpt}")));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|e| LlmError::Failed(format!("{shown}: not a chat-completions answer: {e}")))?;
        let content = answer["choices"][0]["message"]["content"].as_str().ok_or_else(|| {
            LlmError::Failed(format!("{shown}: the answer has no choices[0].message.content"))
        })?;
        let tokens = |k: &str| answer["usage"][k].as_u64().unwrap_or(0) as u32;
        Ok(LlmResponse {
            text: content.to_string(),
            prompt_tokens: tokens("prompt_tokens"),
            completion_tokens: tokens("completion_tokens"),
        })
    }
}
