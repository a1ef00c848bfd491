//! A local HTTP server that speaks the OpenAI chat-completions protocol with scripted answers:
//! deterministic LLM behaviour for tests and examples (no model, no network).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A completion whose message content is this text.
    Content(String),
    /// An HTTP error status with this body.
    Status(u16, String),
}

impl Reply {
    pub fn content(text: impl Into<String>) -> Reply {
        Reply::Content(text.into())
    }
}

type Handler = dyn Fn(&Value) -> Reply + Send + Sync;

pub struct ScriptedLlm {
    /// The API base to configure: `http://127.0.0.1:PORT/v1`.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ScriptedLlm {
    /// Answers the requests in order with `replies`; past the end, HTTP 500.
    pub fn start(replies: Vec<Reply>) -> std::io::Result<ScriptedLlm> {
        let queue = Mutex::new(VecDeque::from(replies));
        ScriptedLlm::with(move |_| {
            queue.lock().unwrap().pop_front().unwrap_or(Reply::Status(500, "the script ran out".into()))
        })
    }

    /// Answers each request (the parsed JSON body) with what `handler` returns.
    pub fn with(handler: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> std::io::Result<ScriptedLlm> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let handler: Arc<Handler> = Arc::new(handler);
        std::thread::Builder::new().name("scripted-llm".into()).spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &*handler, &seen);
            }
        })?;
        Ok(ScriptedLlm { url, requests })
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, handler: &Handler, seen: &Mutex<Vec<Value>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((name, value)) = l.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push(request.clone());
    let (status, payload) = match handler(&request) {
        Reply::Content(text) => (
            200,
            json!({
                "id": "scripted",
                "object": "chat.completion",
                "model": request["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            })
            .to_string(),
        ),
        Reply::Status(code, text) => (code, json!({"error": {"message": text}}).to_string()),
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )?;
    out.flush()
}
