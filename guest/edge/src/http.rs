//! The wasi:http glue: the incoming request's bytes to the front and its reply back. The
//! instance's [`Edge`] lives as long as the host keeps the instance (`wasmtime serve
//! --max-instance-reuse-count`), so only an instance's first request opens the engine (from the
//! model `pre_init` left in the snapshot).

use std::cell::RefCell;
use std::io::Read;

use wasi::http::types::{Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam};

use crate::front::{Edge, Reply, Request, MAX_BODY};

thread_local! {
    static EDGE: RefCell<Option<Edge>> = const { RefCell::new(None) };
}

/// Where the model, `auth.json` and the store are: `HINDSIGHT_DATA`, or `/data` (mount the
/// directory there: `wasmtime serve --dir DATA::/data`).
fn data_dir() -> String {
    std::env::var("HINDSIGHT_DATA").ok().filter(|d| !d.is_empty()).unwrap_or_else(|| "/data".into())
}

struct Handler;

wasi::http::proxy::export!(Handler);

impl wasi::exports::http::incoming_handler::Guest for Handler {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let reply = answer(&request);
        respond(out, reply);
    }
}

fn answer(request: &IncomingRequest) -> Reply {
    let method = match request.method() {
        Method::Get => "GET",
        Method::Post => "POST",
        Method::Delete => "DELETE",
        Method::Put => "PUT",
        _ => "OTHER",
    };
    let path = request.path_with_query().unwrap_or_default();
    let authorization =
        request.headers().get("authorization").into_iter().next().and_then(|v| String::from_utf8(v).ok());
    let body = match read_body(request) {
        Ok(body) => body,
        Err(reply) => return reply,
    };
    EDGE.with(|edge| {
        let mut edge = edge.borrow_mut();
        let edge = edge.get_or_insert_with(|| {
            let edge = Edge::new(data_dir()).with_preloaded(crate::pre_init::take());
            #[cfg(feature = "spin")]
            let edge = edge.with_store(crate::spin::store());
            match crate::llm_http::HttpLlm::from_env() {
                Some(llm) => edge.with_llm(std::rc::Rc::new(llm)),
                None => edge,
            }
        });
        edge.handle(&Request { method, path: &path, authorization: authorization.as_deref(), body: &body })
    })
}

fn too_large(message: String) -> Reply {
    Reply {
        status: 413,
        headers: vec![("content-type", "application/json".into())],
        body:
            serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": message}})
                .to_string()
                .into_bytes(),
    }
}

fn read_body(request: &IncomingRequest) -> Result<Vec<u8>, Reply> {
    let Ok(body) = request.consume() else { return Ok(Vec::new()) };
    let Ok(mut stream) = body.stream() else { return Ok(Vec::new()) };
    let mut bytes = Vec::new();
    let read = (&mut stream).take(MAX_BODY as u64 + 1).read_to_end(&mut bytes);
    drop(stream);
    if let Err(e) = read {
        return Err(too_large(format!("request body: {e}")));
    }
    if bytes.len() > MAX_BODY {
        return Err(too_large(format!("request body: larger than {MAX_BODY} bytes")));
    }
    Ok(bytes)
}

fn respond(out: ResponseOutparam, reply: Reply) {
    let headers: Vec<(String, Vec<u8>)> =
        reply.headers.into_iter().map(|(k, v)| (k.to_string(), v.into_bytes())).collect();
    let fields = Fields::from_list(&headers).unwrap_or_else(|_| Fields::new());
    let response = OutgoingResponse::new(fields);
    let _ = response.set_status_code(reply.status);
    let Ok(body) = response.body() else { return };
    ResponseOutparam::set(out, Ok(response));
    if let Ok(stream) = body.write() {
        for chunk in reply.body.chunks(4096) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                break;
            }
        }
        drop(stream);
    }
    let _ = OutgoingBody::finish(body, None);
}
