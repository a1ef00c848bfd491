//! Bearer tokens for `serve --http --auth FILE`: a request without a valid token is answered
//! 401 before it reaches MCP; a valid one carries its principal to the tools, which act as it
//! (the library checks each bank call against its rights). The file is re-read on SIGHUP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hindsight::access::{Principal, Principals};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::error::{CliError, CliResult};

/// The server's principals, if it has an auth file.
#[derive(Clone)]
pub struct Auth {
    file: Option<(PathBuf, Arc<RwLock<Principals>>)>,
}

/// Who made the request: put in the HTTP request's extensions, read by the tools.
#[derive(Clone)]
struct Caller(Principal);

impl Auth {
    /// Reads the auth file. Without one, only loopback addresses may be served: anyone who can
    /// reach the port could otherwise read and change every bank.
    pub fn new(file: Option<PathBuf>, addr: SocketAddr) -> CliResult<Auth> {
        match file {
            Some(path) => {
                let principals = load(&path)?;
                if principals.is_empty() {
                    return Err(CliError::field("auth", format!("{} lists no principals", path.display())));
                }
                Ok(Auth { file: Some((path, Arc::new(RwLock::new(principals)))) })
            }
            None if addr.ip().is_loopback() => Ok(Auth { file: None }),
            None => Err(CliError::field(
                "http",
                format!(
                    "refusing to listen on {addr} without --auth: anyone who can reach it could read and change \
                     every bank. Give --auth FILE (principals with tokens and bank rights; see docs/teams.md) or \
                     listen on 127.0.0.1"
                ),
            )),
        }
    }

    /// Whether every request needs a principal's token.
    pub fn required(&self) -> bool {
        self.file.is_some()
    }

    /// For the start-up line.
    pub fn describe(&self) -> String {
        match &self.file {
            Some((path, principals)) => format!(
                " (auth: {} principals from {})",
                principals.read().unwrap_or_else(|p| p.into_inner()).len(),
                path.display()
            ),
            None => " (no auth: loopback only)".into(),
        }
    }

    /// Re-reads the file on each SIGHUP; a file that no longer parses keeps the principals as
    /// they were, and says why.
    pub fn reload_on_hangup(&self) {
        #[cfg(unix)]
        if let Some((path, principals)) = self.file.clone() {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut hangups) = signal(SignalKind::hangup()) else { return };
            tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    match load(&path) {
                        Ok(fresh) if !fresh.is_empty() => {
                            let n = fresh.len();
                            *principals.write().unwrap_or_else(|p| p.into_inner()) = fresh;
                            eprintln!("hindsight: reloaded {n} principals from {}", path.display());
                        }
                        Ok(_) => eprintln!(
                            "hindsight: {} lists no principals; keeping the ones loaded before",
                            path.display()
                        ),
                        Err(e) => eprintln!("hindsight: {e}; keeping the principals loaded before"),
                    }
                }
            });
        }
    }
}

/// Reads a principals file; an error names the file and the field.
fn load(path: &std::path::Path) -> hindsight::Result<Principals> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| hindsight::Error::Config(format!("--auth {}: {e}", path.display())))?;
    Principals::from_json(&text).map_err(|e| {
        hindsight::Error::Config(format!("--auth {}: {}: {}", path.display(), e.field, e.message))
    })
}

/// Lets a request through when the server has no auth file, or when its bearer token belongs
/// to a principal (then carried along); otherwise 401.
pub async fn require_token(State(auth): State<Auth>, mut request: Request, next: Next) -> Response {
    let Some((_, principals)) = &auth.file else {
        return next.run(request).await;
    };
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    let principal =
        token.and_then(|t| principals.read().unwrap_or_else(|p| p.into_inner()).authenticate(t).cloned());
    match principal {
        Some(p) => {
            request.extensions_mut().insert(Caller(p));
            next.run(request).await
        }
        None => {
            let why =
                if token.is_some() { "the bearer token is not valid" } else { "a bearer token is required" };
            let body = serde_json::json!({"error": {"kind": "unauthorized", "message": why}}).to_string();
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer"), (header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response()
        }
    }
}

/// The principal a tool call is made as: the HTTP request's, when the server checks tokens.
pub fn principal(ctx: &RequestContext<RoleServer>) -> Option<Principal> {
    ctx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .map(|c| c.0.clone())
}

/// The principal of a plain HTTP request (not a tool call), when the server checks tokens.
pub fn caller_of(request: &Request) -> Option<Principal> {
    request.extensions().get::<Caller>().map(|c| c.0.clone())
}
