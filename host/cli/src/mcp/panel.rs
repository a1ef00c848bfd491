//! The memory panel: one page (`/`, embedded in the binary, no network needed) that calls the
//! MCP tools at `/mcp` with the user's token, and `/export`, a bank's JSON lines as a download.
//! Both go through the same server, identities and rights as MCP clients.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use hindsight::types::Vectors;
use hindsight::Hindsight;

use super::auth;

const PAGE: &str = include_str!("../panel/index.html");

pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        PAGE,
    )
        .into_response()
}

#[derive(Clone)]
pub struct PanelState {
    pub hs: Hindsight,
    pub default_bank: String,
    pub auth_required: bool,
}

/// `?bank=B&vectors=true`, percent-decoded.
fn export_params(request: &Request) -> (Option<String>, bool) {
    let (mut bank, mut vectors) = (None, false);
    for pair in request.uri().query().unwrap_or("").split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "bank" => bank = Some(percent_decode(value)),
            "vectors" => vectors = value == "true" || value == "1",
            _ => {}
        }
    }
    (bank.filter(|b| !b.is_empty()), vectors)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `GET /export?bank=B[&vectors=true]`: the bank as JSON lines, as the caller may read it,
/// streamed a page at a time.
pub async fn export(State(state): State<PanelState>, request: Request) -> Response {
    let (bank, vectors) = export_params(&request);
    let hs = match auth::caller_of(&request) {
        Some(principal) => state.hs.as_principal(principal),
        None if state.auth_required => return error(StatusCode::UNAUTHORIZED, "a bearer token is required"),
        // Without tokens only this machine may read a bank: a page on another site must not get
        // it through a name that resolves here (DNS rebinding). /mcp checks the same for itself.
        None if !from_loopback_name(&request) => {
            return error(StatusCode::FORBIDDEN, "without --auth, banks are served to localhost only")
        }
        None => state.hs.clone(),
    };
    let bank = bank.unwrap_or(state.default_bank);
    let name = bank.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_', "_");
    // Rights and existence are checked before the first byte, so they come back as a status.
    let handle = match hs.bank(&bank) {
        Ok(b) => b,
        Err(e) => return engine_error(e),
    };
    let checked = handle.clone();
    match tokio::task::spawn_blocking(move || checked.stats()).await {
        Ok(Ok(stats)) if stats.total > 0 => {}
        Ok(Ok(_)) => return error(StatusCode::NOT_FOUND, &format!("bank {bank} holds nothing")),
        Ok(Err(e)) => return engine_error(e),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut chunk = Vec::with_capacity(1 << 16);
        let sent = handle.export(if vectors { Vectors::Include } else { Vectors::Omit }, |line| {
            chunk.extend_from_slice(line.as_bytes());
            chunk.push(b'\n');
            if chunk.len() >= 1 << 16 {
                tx.blocking_send(Ok(std::mem::take(&mut chunk)))
                    .map_err(|_| hindsight::Error::invalid("export", "the client went away"))?;
            }
            Ok(())
        });
        let last = match sent {
            Ok(_) => Ok(chunk),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        let _ = tx.blocking_send(last);
    });
    (
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}.jsonl\"")),
        ],
        axum::body::Body::from_stream(Chunks(rx)),
    )
        .into_response()
}

/// The export's pages as a body stream.
struct Chunks(tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>);

impl futures_core::Stream for Chunks {
    type Item = Result<Vec<u8>, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// Whether the request names this machine (`Host` is localhost or a loopback address).
fn from_loopback_name(request: &Request) -> bool {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn engine_error(e: hindsight::Error) -> Response {
    let status = match &e {
        hindsight::Error::Denied(_) => StatusCode::FORBIDDEN,
        hindsight::Error::NotFound { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_REQUEST,
    };
    error(status, &e.to_string())
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": {"message": message}}).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
