//! The behaviour every host shares, as data (tests/conformance): the Rust library's stores, its
//! OpenAI-compatible client and its defaults against the cases the npm and PyPI packages pass too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hindsight::{
    llm::{JsonMode, Llm, LlmError, LlmOperation, LlmRequest, OpenAi},
    store::{MemoryStore, Op, PostgresStore, SqliteStore, Store, StoreError},
    types::Named,
};
use serde_json::Value;

fn data(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance").join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) => {
            let hex = o["hex"].as_str().unwrap();
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
        }
        other => panic!("not a value: {other}"),
    }
}

fn run_store_cases(make: &dyn Fn(usize) -> Box<dyn Store>) {
    for (n, case) in data("store.json")["cases"].as_array().unwrap().iter().enumerate() {
        let store = make(n);
        let name = case["name"].as_str().unwrap();
        for step in case["steps"].as_array().unwrap() {
            if let Some(ops) = step.get("commit") {
                let ops: Vec<Op> = ops
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|op| {
                        let key = op[1].as_str().unwrap().to_string();
                        match op[0].as_str().unwrap() {
                            "put" => Op::Put(key, bytes(&op[2])),
                            "delete" => Op::Delete(key),
                            _ => Op::Expect(key, (!op[2].is_null()).then(|| bytes(&op[2]))),
                        }
                    })
                    .collect();
                let got = store.commit(ops);
                match step["expect"].as_str().unwrap() {
                    "ok" => assert!(got.is_ok(), "{name}: {step}: {got:?}"),
                    _ => assert!(matches!(got, Err(StoreError::Conflict(_))), "{name}: {step}: {got:?}"),
                }
            } else if let Some(key) = step.get("get") {
                let want = (!step["expect"].is_null()).then(|| bytes(&step["expect"]));
                assert_eq!(store.get(key.as_str().unwrap()).unwrap(), want, "{name}: {step}");
            } else {
                let got = store
                    .scan(
                        step["scan"].as_str().unwrap(),
                        step["start_after"].as_str(),
                        step["limit"].as_u64().unwrap() as u32,
                    )
                    .unwrap();
                let want: Vec<(String, Vec<u8>)> = step["expect"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|kv| (kv[0].as_str().unwrap().to_string(), bytes(&kv[1])))
                    .collect();
                assert_eq!(got, want, "{name}: {step}");
            }
        }
    }
}

#[test]
fn the_sqlite_store_passes_the_store_cases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    run_store_cases(&|n| Box::new(SqliteStore::open(path.join(format!("case-{n}.db"))).unwrap()));
}

#[test]
fn the_postgres_store_passes_the_store_cases() {
    let Some(_) = hindsight_tests::postgres_database("probe") else { return };
    run_store_cases(&|n| {
        let url = hindsight_tests::postgres_database(&format!("conformance_{n}")).unwrap();
        Box::new(PostgresStore::open(&url, 2).unwrap())
    });
}

#[test]
fn the_memory_store_passes_the_store_cases() {
    run_store_cases(&|_| Box::new(MemoryStore::new()));
}

/// The requests a replay server got: headers (lower-cased) and the JSON body.
type Requests = Arc<Mutex<Vec<(Vec<(String, String)>, Value)>>>;

/// A server that gives a transcript's answers in order; the requests it got.
fn replay(answers: Vec<Value>) -> (String, Requests) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut headers, mut length, mut line) = (Vec::new(), 0, String::new());
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let l = line.trim_end();
                if l.is_empty() {
                    break;
                }
                if let Some((k, v)) = l.split_once(':') {
                    let (k, v) = (k.trim().to_lowercase(), v.trim().to_string());
                    if k == "content-length" {
                        length = v.parse().unwrap_or(0);
                    }
                    headers.push((k, v));
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            log.lock().unwrap().push((headers, serde_json::from_slice(&body).unwrap_or(Value::Null)));
            let a =
                answers.next().unwrap_or_else(|| serde_json::json!({"status": 500, "body_text": "ran out"}));
            if let Some(ms) = a["delay_ms"].as_u64() {
                std::thread::sleep(Duration::from_millis(ms));
            }
            let text = a["body_text"].as_str().map(str::to_string).unwrap_or_else(|| a["body"].to_string());
            let mut extra = String::new();
            for (k, v) in a["headers"].as_object().into_iter().flatten() {
                extra.push_str(&format!("{k}: {}\r\n", v.as_str().unwrap()));
            }
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 {} Replayed\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                a["status"],
                text.len()
            );
        }
    });
    (url, seen)
}

#[test]
fn the_openai_client_follows_the_llm_transcripts() {
    let llm = data("llm.json");
    for t in llm["transcripts"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let (url, seen) = replay(t["server"].as_array().unwrap().clone());
        let c = &t["config"];
        let mut client = OpenAi::new(url, c["model"].as_str().unwrap_or("default"));
        if let Some(k) = c["api_key"].as_str() {
            client = client.api_key(k);
        }
        if let Some(m) = c["json_mode"].as_str() {
            client = client.json_mode(JsonMode::parse(m).unwrap());
        }
        if let Some(r) = c["retries"].as_u64() {
            client = client.retries(r as u32);
        }
        if let Some(ms) = c["timeout_ms"].as_u64() {
            client = client.timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = c["backoff_ms"].as_u64() {
            client = client.backoff(Duration::from_millis(ms));
        }
        for (op, model) in c["models"].as_object().into_iter().flatten() {
            client = client.model_for(LlmOperation::parse("models", op).unwrap(), model.as_str().unwrap());
        }
        let mut r = llm["default_request"].clone();
        for (k, v) in t["request"].as_object().into_iter().flatten() {
            r[k] = v.clone();
        }
        let request = LlmRequest {
            operation: LlmOperation::parse("operation", r["operation"].as_str().unwrap()).unwrap(),
            system: r["system"].as_str().unwrap().into(),
            prompt: r["prompt"].as_str().unwrap().into(),
            json_schema: r["json_schema"].as_str().map(String::from),
            max_tokens: r["max_tokens"].as_u64().unwrap() as u32,
            temperature: r["temperature"].as_f64().unwrap() as f32,
        };
        let got = client.complete(&request);
        let expect = &t["expect"];
        match (expect.get("failed"), got) {
            (Some(parts), Err(LlmError::Failed(message))) => {
                for part in parts.as_array().unwrap() {
                    assert!(message.contains(part.as_str().unwrap()), "{name}: {part} not in {message}");
                }
            }
            (None, Ok(response)) => {
                assert_eq!(response.text, expect["text"].as_str().unwrap(), "{name}");
                assert_eq!(
                    u64::from(response.prompt_tokens),
                    expect["prompt_tokens"].as_u64().unwrap(),
                    "{name}"
                );
                assert_eq!(
                    u64::from(response.completion_tokens),
                    expect["completion_tokens"].as_u64().unwrap(),
                    "{name}"
                );
            }
            (_, other) => panic!("{name}: expected {expect}, got {other:?}"),
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len() as u64, t["requests"]["count"].as_u64().unwrap(), "{name}");
        for check in t["requests"]["checks"].as_array().into_iter().flatten() {
            let (headers, body) = &seen[check["index"].as_u64().unwrap() as usize];
            let value = match check.get("header") {
                Some(h) => headers
                    .iter()
                    .find(|(k, _)| k == h.as_str().unwrap())
                    .map(|(_, v)| Value::String(v.clone()))
                    .unwrap_or(Value::Null),
                None => check["path"].as_array().unwrap().iter().fold(body.clone(), |v, key| match key {
                    Value::String(k) => v.get(k).cloned().unwrap_or(Value::Null),
                    Value::Number(n) => v.get(n.as_u64().unwrap() as usize).cloned().unwrap_or(Value::Null),
                    _ => Value::Null,
                }),
            };
            if check["absent"] == true {
                assert!(value.is_null(), "{name}: {check}: {value}");
            } else {
                assert_eq!(value, check["equals"], "{name}: {check}");
            }
        }
    }
}

#[test]
fn the_defaults_are_the_table_every_host_shares() {
    let d = data("defaults.json");
    assert_eq!(hindsight::defaults::MODELS_ENV, d["models_dir"]["env"]);
    assert_eq!(hindsight::defaults::MODEL_FILE, d["models_dir"]["files"][0]);
    assert_eq!(hindsight::defaults::TOKENIZER_FILE, d["models_dir"]["files"][1]);
    assert_eq!(hindsight::llm::ENV_URL, d["llm_env"]["url"]);
    assert_eq!(hindsight::llm::DEFAULT_TIMEOUT.as_millis() as u64, d["llm"]["timeout_ms"].as_u64().unwrap());
    assert_eq!(u64::from(hindsight::llm::DEFAULT_RETRIES), d["llm"]["retries"].as_u64().unwrap());
    assert_eq!(
        hindsight::llm::DEFAULT_BACKOFF.as_millis() as u64,
        d["llm"]["backoff_first_ms"].as_u64().unwrap()
    );
    assert_eq!(hindsight::llm::MAX_BACKOFF.as_millis() as u64, d["llm"]["backoff_max_ms"].as_u64().unwrap());
    let operations: Vec<&str> = LlmOperation::ALL.iter().map(|o| o.as_str()).collect();
    assert_eq!(serde_json::json!(operations), d["llm"]["operations"]);
    for mode in d["llm"]["json_modes"].as_array().unwrap() {
        JsonMode::parse(mode.as_str().unwrap()).unwrap();
    }
    assert_eq!(
        hindsight::Builder::DEFAULT_DEADLINE.as_millis() as u64,
        d["engine"]["call_deadline_ms"].as_u64().unwrap()
    );
    assert_eq!(
        (hindsight::Builder::DEFAULT_MEMORY_LIMIT >> 20) as u64,
        d["engine"]["memory_limit_mib"].as_u64().unwrap()
    );
}
