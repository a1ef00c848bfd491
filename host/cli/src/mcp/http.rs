//! What the HTTP transport adds to rmcp's: a JSON-RPC error for a body that is not JSON (rmcp
//! answers 415) or a `tools/call` with bad `arguments`, a deadline on reading the body, and caps
//! on live sessions, for all and per principal, with each session bound to the principal that
//! opened it (rmcp closes a session after [`IDLE`] without a request, but opens as many as it is
//! asked for, to anyone who names its id).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, SessionManager};
use rmcp::transport::WorkerTransport;

use super::{auth, frame};

/// Live sessions at most: each holds a server task and its buffers.
pub const MAX_SESSIONS: usize = 64;
/// Live sessions one principal may hold, so that no principal takes them all.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 16;
/// A session with no request for this long is closed.
pub const IDLE: Duration = Duration::from_secs(300);
/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;
const SESSION_HEADER: &str = "mcp-session-id";

/// What the `/mcp` guard needs: the sessions, who owns each, and how long a body may take.
pub struct Gate {
    sessions: Arc<CappedSessions>,
    owners: Mutex<Owners>,
    read_timeout: Duration,
}

/// Which principal opened each session, and how many sessions each is opening right now (so that
/// concurrent opens cannot pass the quota together).
#[derive(Default)]
struct Owners {
    by_session: HashMap<SessionId, String>,
    opening: HashMap<String, usize>,
}

impl Gate {
    pub fn new(sessions: Arc<CappedSessions>, read_timeout: Duration) -> Gate {
        Gate { sessions, owners: Mutex::default(), read_timeout }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves an opening for `principal`, or says why it may not open another session. The
    /// reservation ends when it is dropped (a client gone mid-request frees it too).
    async fn reserve(&self, principal: &str) -> Result<Reservation<'_>, SessionError> {
        let live = self.sessions.inner.sessions.read().await;
        let mut owners = self.owners();
        owners.by_session.retain(|id, _| live.contains_key(id));
        let held = owners.by_session.values().filter(|o| *o == principal).count()
            + owners.opening.get(principal).copied().unwrap_or(0);
        if held >= MAX_SESSIONS_PER_PRINCIPAL {
            return Err(SessionError::PrincipalFull(principal.to_string(), MAX_SESSIONS_PER_PRINCIPAL));
        }
        *owners.opening.entry(principal.to_string()).or_default() += 1;
        Ok(Reservation { gate: self, principal: principal.to_string(), opened: None })
    }

    /// Whether `principal` may use session `id`: a session opened by another principal is, to it,
    /// a session that does not exist.
    fn may_use(&self, id: &str, principal: &str) -> bool {
        self.owners().by_session.get(id).is_none_or(|owner| owner == principal)
    }
}

/// Guards `/mcp`: a request naming another principal's session gets the 404 an unknown session
/// gets; a POST body is read within the read timeout and checked with [`frame::reject`] (the
/// JSON-RPC error answered here); a new session is refused (503, which rmcp would answer 500)
/// while all sessions, or all the principal's, are taken. Anything else goes on to rmcp unchanged.
pub async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    // Without an auth file there are no principals: only the global cap applies.
    let principal = auth::caller_of(&request).map(|p| p.name().to_string());
    let session = request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let (Some(id), Some(principal)) = (&session, &principal) {
        if !gate.may_use(id, principal) {
            return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
        }
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes =
        match tokio::time::timeout(gate.read_timeout, axum::body::to_bytes(body, MAX_BODY)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                let reply =
                    frame::error(serde_json::Value::Null, frame::PARSE_ERROR, format!("request body: {e}"));
                return json_reply(StatusCode::PAYLOAD_TOO_LARGE, reply);
            }
            Err(_) => {
                let message = format!("request body: not received within {} s", gate.read_timeout.as_secs());
                return json_reply(
                    StatusCode::REQUEST_TIMEOUT,
                    frame::error(serde_json::Value::Null, frame::PARSE_ERROR, message),
                );
            }
        };
    if let Some(reply) = frame::reject(&bytes) {
        return json_reply(StatusCode::BAD_REQUEST, reply);
    }
    let request = Request::from_parts(parts, Body::from(bytes.clone()));
    if session.is_some() {
        return next.run(request).await;
    }
    let reservation = if gate.sessions.full().await {
        Err(SessionError::Full(gate.sessions.cap))
    } else {
        match &principal {
            Some(principal) => gate.reserve(principal).await.map(Some),
            None => Ok(None),
        }
    };
    let mut reservation = match reservation {
        Ok(r) => r,
        Err(refused) => {
            let id = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .unwrap_or(serde_json::Value::Null);
            let mut response =
                json_reply(StatusCode::SERVICE_UNAVAILABLE, frame::error(id, -32000, refused.to_string()));
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("60"));
            return response;
        }
    };
    let response = next.run(request).await;
    if let Some(reservation) = reservation.as_mut() {
        reservation.opened =
            response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(SessionId::from);
    }
    response
}

/// A session being opened for a principal; dropped, it records the session it became, if any.
struct Reservation<'a> {
    gate: &'a Gate,
    principal: String,
    opened: Option<SessionId>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut owners = self.gate.owners();
        if let Some(n) = owners.opening.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                owners.opening.remove(&self.principal);
            }
        }
        if let Some(id) = self.opened.take() {
            owners.by_session.insert(id, std::mem::take(&mut self.principal));
        }
    }
}

fn json_reply(status: StatusCode, body: serde_json::Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// rmcp's local session manager with a cap on how many sessions live at once.
pub struct CappedSessions {
    inner: LocalSessionManager,
    cap: usize,
}

impl CappedSessions {
    pub fn new(cap: usize) -> CappedSessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(IDLE);
        CappedSessions { inner, cap }
    }

    async fn full(&self) -> bool {
        self.inner.sessions.read().await.len() >= self.cap
    }
}

#[derive(Debug)]
pub enum SessionError {
    Full(usize),
    PrincipalFull(String, usize),
    Inner(LocalSessionManagerError),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Full(cap) => write!(
                f,
                "too many open sessions (the limit is {cap}); close one (HTTP DELETE) or wait for an idle one to expire"
            ),
            SessionError::PrincipalFull(principal, cap) => write!(
                f,
                "principal {principal:?} has {cap} open sessions, its limit; close one (HTTP DELETE) or wait for an idle one to expire"
            ),
            SessionError::Inner(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<LocalSessionManagerError> for SessionError {
    fn from(e: LocalSessionManagerError) -> Self {
        SessionError::Inner(e)
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if self.full().await {
            return Err(SessionError::Full(self.cap));
        }
        Ok(self.inner.create_session().await?)
    }
    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }
    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.close_session(id).await?)
    }
    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }
    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }
    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
    async fn restore_session(&self, _id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // Sessions live in this process only: an unknown id is answered 404 and the client
        // initialises again.
        Ok(RestoreOutcome::NotSupported)
    }
}
