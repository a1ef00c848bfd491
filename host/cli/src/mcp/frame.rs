//! What both transports check before a message reaches rmcp, which silently drops a line that is
//! not JSON and answers a `tools/call` whose `arguments` is not an object with "method not found".
//! JSON-RPC 2.0 says: -32700 for a parse error (id null), -32602 for invalid params.

use serde_json::{json, Value};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_PARAMS: i64 = -32602;

/// `None` when the message may go on to the MCP server; otherwise the JSON-RPC error reply.
pub fn reject(body: &[u8]) -> Option<Value> {
    let message: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, PARSE_ERROR, format!("parse error: {e}"))),
    };
    let Some(object) = message.as_object() else {
        // A batch or a bare value: rmcp answers these itself.
        return None;
    };
    if object.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    match object.get("params") {
        Some(Value::Object(params)) => match params.get("arguments") {
            None | Some(Value::Object(_)) | Some(Value::Null) => None,
            Some(other) => Some(error(
                id,
                INVALID_PARAMS,
                format!("params.arguments: must be an object of the tool's arguments, got {other}"),
            )),
        },
        None => Some(error(
            id,
            INVALID_PARAMS,
            "params: missing; tools/call needs {\"name\", \"arguments\"}".into(),
        )),
        Some(other) => Some(error(id, INVALID_PARAMS, format!("params: must be an object, got {other}"))),
    }
}

pub fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_a_parse_error_with_a_null_id() {
        let reply = reject(b"this is not json").unwrap();
        assert_eq!(reply["error"]["code"], PARSE_ERROR);
        assert_eq!(reply["id"], Value::Null);
    }

    #[test]
    fn non_object_arguments_are_invalid_params_with_the_request_id() {
        let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_search","arguments":"notanobject"}}"#;
        let reply = reject(body).unwrap();
        assert_eq!(reply["error"]["code"], INVALID_PARAMS);
        assert_eq!(reply["id"], 7);
        assert!(reply["error"]["message"].as_str().unwrap().contains("params.arguments"));
    }

    #[test]
    fn well_formed_messages_pass() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"query":"q"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ] {
            assert!(reject(body.as_bytes()).is_none(), "{body}");
        }
    }
}
