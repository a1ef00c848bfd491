//! The memory panel: one page (`/`, embedded in the binary, no network needed) that calls the
//! MCP tools at `/mcp` with the user's token, and `/export`, a bank's JSON lines as a download.
//! Both go through the same server, identities and rights as MCP clients.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
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

/// `GET /export?bank=B[&vectors=true]`: the bank as JSON lines, as the caller may read it.
pub async fn export(State(state): State<PanelState>, request: Request) -> Response {
    let (bank, vectors) = export_params(&request);
    let hs = match auth::caller_of(&request) {
        Some(principal) => state.hs.as_principal(principal),
        None if state.auth_required => return error(StatusCode::UNAUTHORIZED, "a bearer token is required"),
        None => state.hs.clone(),
    };
    let bank = bank.unwrap_or(state.default_bank);
    let name = bank.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_', "_");
    let done = tokio::task::spawn_blocking(move || -> hindsight::Result<Vec<u8>> {
        let mut body = Vec::new();
        hs.bank(&bank)?.export(vectors, |line| {
            body.extend_from_slice(line.as_bytes());
            body.push(b'\n');
            Ok(())
        })?;
        Ok(body)
    })
    .await;
    match done {
        Ok(Ok(body)) => (
            [
                (header::CONTENT_TYPE, "application/x-ndjson".to_string()),
                (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}.jsonl\"")),
            ],
            body,
        )
            .into_response(),
        Ok(Err(hindsight::Error::Denied(m))) => error(StatusCode::FORBIDDEN, &m),
        Ok(Err(e)) => error(StatusCode::BAD_REQUEST, &e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": {"message": message}}).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
