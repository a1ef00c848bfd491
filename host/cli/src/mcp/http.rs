//! What the HTTP transport adds to rmcp's: a JSON-RPC error for a body that is not JSON (rmcp
//! answers 415) or a `tools/call` with bad `arguments`, and a cap on live sessions (rmcp closes a
//! session after [`IDLE`] without a request, but opens as many as it is asked for).

use std::sync::Arc;
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

use super::frame;

/// Live sessions at most: each holds a server task and its buffers.
pub const MAX_SESSIONS: usize = 64;
/// A session with no request for this long is closed.
pub const IDLE: Duration = Duration::from_secs(300);
/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// Checks a POST body with [`frame::reject`] and answers the JSON-RPC error itself, and refuses
/// a new session while all are taken (503, which rmcp would answer 500); anything else goes on
/// to rmcp unchanged.
pub async fn reject_malformed(
    State(sessions): State<Arc<CappedSessions>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let opens_session = !request.headers().contains_key("mcp-session-id");
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            let reply =
                frame::error(serde_json::Value::Null, frame::PARSE_ERROR, format!("request body: {e}"));
            return json_reply(StatusCode::PAYLOAD_TOO_LARGE, reply);
        }
    };
    if let Some(reply) = frame::reject(&bytes) {
        return json_reply(StatusCode::BAD_REQUEST, reply);
    }
    if opens_session && sessions.full().await {
        let id = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(serde_json::Value::Null);
        let message = SessionError::Full(sessions.cap).to_string();
        let mut response = json_reply(StatusCode::SERVICE_UNAVAILABLE, frame::error(id, -32000, message));
        response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("60"));
        return response;
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
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
    Inner(LocalSessionManagerError),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::Full(cap) => write!(
                f,
                "too many open sessions (the limit is {cap}); close one (HTTP DELETE) or wait for an idle one to expire"
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
