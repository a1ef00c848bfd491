//! `hindsight-dev bench --peer chroma`: the same measurements of ChromaDB with an onnxruntime
//! embedding function over hindsight's own `model.onnx`, on the same texts, queries and vectors,
//! in the same run, printed side by side. The Python side (`peers/`) is built into the binary
//! and set up in a venv from the package index on first use.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::error::{CliError, CliResult};

const SETUP: &str = include_str!("../peers/setup.sh");
const CHROMA: &str = include_str!("../peers/chroma_peer.py");

fn io(what: &str) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::new("config", format!("{what}: {e}"))
}

/// What the peer is given: the texts to ingest with embedding, the queries (with hindsight's
/// vectors for them), and the bank-size corpus (vectors and texts; each size is a prefix).
pub struct Inputs<'a> {
    pub texts: &'a [String],
    pub corpus_texts: &'a [String],
    pub queries: &'a [(String, Vec<f32>)],
    pub corpus: &'a [(String, Vec<f32>)],
    pub sizes: &'a [usize],
    pub runs: usize,
}

fn write_lines(path: &Path, lines: impl Iterator<Item = Value>) -> CliResult<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io("writing peer input"))?);
    for line in lines {
        writeln!(out, "{line}").map_err(io("writing peer input"))?;
    }
    out.flush().map_err(io("writing peer input"))
}

/// Runs Chroma's side and returns its JSON report.
pub fn chroma(models: &Path, inputs: &Inputs) -> CliResult<Value> {
    // The script runs in the temporary directory: a relative path would point elsewhere there.
    let models = models.canonicalize().map_err(io("the models directory"))?;
    let dir = tempfile::tempdir().map_err(io("temporary directory"))?;
    let d = dir.path();
    std::fs::write(d.join("setup.sh"), SETUP).map_err(io("writing setup.sh"))?;
    std::fs::write(d.join("chroma_peer.py"), CHROMA).map_err(io("writing chroma_peer.py"))?;
    write_lines(&d.join("texts.jsonl"), inputs.texts.iter().map(|t| json!({"text": t})))?;
    write_lines(&d.join("corpus-texts.jsonl"), inputs.corpus_texts.iter().map(|t| json!({"text": t})))?;
    write_lines(
        &d.join("queries.jsonl"),
        inputs.queries.iter().map(|(t, v)| json!({"text": t, "vector": v})),
    )?;
    write_lines(&d.join("vector-texts.jsonl"), inputs.corpus.iter().map(|(t, _)| json!({"text": t})))?;
    let mut raw = Vec::with_capacity(inputs.corpus.len() * 384 * 4);
    for (_, v) in inputs.corpus {
        raw.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    }
    std::fs::write(d.join("vectors.f32"), raw).map_err(io("writing vectors.f32"))?;

    eprintln!("peer: setting up the Python venv for Chroma (the first time installs from PyPI)");
    let setup = Command::new("bash")
        .arg(d.join("setup.sh"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(io("running setup.sh (needs bash and python3)"))?;
    if !setup.status.success() {
        return Err(CliError::new("config", "setting up the Chroma peer's venv failed (see above)"));
    }
    let python = String::from_utf8_lossy(&setup.stdout).lines().last().unwrap_or_default().trim().to_string();
    if python.is_empty() {
        return Err(CliError::new("config", "setup.sh named no Python interpreter"));
    }
    let sizes = inputs.sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let run = Command::new(&python)
        .arg(d.join("chroma_peer.py"))
        .arg("--models")
        .arg(&models)
        .args(["--texts", "texts.jsonl", "--queries", "queries.jsonl"])
        .args(["--corpus-texts", "corpus-texts.jsonl"])
        .args(["--vectors", "vectors.f32", "--vector-texts", "vector-texts.jsonl"])
        .args(["--sizes", &sizes, "--runs", &inputs.runs.to_string()])
        .current_dir(d)
        .stderr(Stdio::inherit())
        .output()
        .map_err(io("running chroma_peer.py"))?;
    if !run.status.success() {
        return Err(CliError::new("config", "the Chroma peer benchmark failed (see above)"));
    }
    serde_json::from_slice(&run.stdout)
        .map_err(|e| CliError::new("config", format!("the Chroma peer printed no JSON report: {e}")))
}

/// One JSON object per bank size, the two systems side by side under the same keys:
/// `{size, hindsight: {ingest_per_s, query_p50_ms, query_noembed_p50_ms, embed_short_ms, path, …},
/// chroma: {…}}`. Ingest and short-text embedding do not depend on the size; they repeat.
pub fn rows_by_size(hindsight: &Value, chroma: &Value) -> Vec<Value> {
    let empty = Vec::new();
    hindsight["sizes"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|ours| {
            let size = ours["size"].as_u64().unwrap_or(0);
            let theirs = peer_size(chroma, size);
            json!({
                "size": size,
                "hindsight": {
                    "ingest_per_s": hindsight["ingest_embed_per_s"],
                    "ingest_corpus_per_s": hindsight["ingest_corpus_per_s"],
                    "query_p50_ms": ours["recall_p50_ms"],
                    "query_noembed_p50_ms": ours["recall_noembed_p50_ms"],
                    "embed_short_ms": hindsight["embed_short_ms"],
                    "ingest_given_vectors_per_s": ours["ingest_given_vectors_per_s"],
                    "text_query_p50_ms": hindsight["query_embed_p50_ms"],
                    "path": hindsight["path"],
                },
                "chroma": {
                    "ingest_per_s": chroma["ingest_embed_per_s"],
                    "ingest_corpus_per_s": chroma["ingest_corpus_per_s"],
                    "query_p50_ms": theirs["query_embed_p50_ms"],
                    "query_noembed_p50_ms": theirs["query_noembed_p50_ms"],
                    "embed_short_ms": chroma["embed_short_ms"],
                    "ingest_given_vectors_per_s": theirs["ingest_given_vectors_per_s"],
                    "text_query_p50_ms": chroma["query_embed_p50_ms"],
                    "skipped": theirs["skipped"],
                },
            })
        })
        .collect()
}

/// The peer's figures for one bank size (null when it has none).
fn peer_size(chroma: &Value, size: u64) -> Value {
    let sizes = chroma["sizes"].as_array().map(Vec::as_slice).unwrap_or_default();
    sizes.iter().find(|s| s["size"].as_u64() == Some(size)).cloned().unwrap_or(Value::Null)
}

/// The two systems' figures as a Markdown table.
pub fn table(hindsight: &Value, chroma: &Value) -> String {
    let mut rows: Vec<(String, Option<f64>, Option<f64>, &str)> = vec![
        (
            format!("ingest with embedding ({} texts, 32 per call)", hindsight["ingest_embed_items"]),
            chroma["ingest_embed_per_s"].as_f64(),
            hindsight["ingest_embed_per_s"].as_f64(),
            "items/s",
        ),
        (
            format!(
                "ingest with embedding ({} 20-word texts, 32 per call)",
                hindsight["ingest_corpus_items"]
            ),
            chroma["ingest_corpus_per_s"].as_f64(),
            hindsight["ingest_corpus_per_s"].as_f64(),
            "items/s",
        ),
        (
            "query p50 incl. embedding, k = 10, on those texts".into(),
            chroma["query_embed_p50_ms"].as_f64(),
            hindsight["query_embed_p50_ms"].as_f64(),
            "ms",
        ),
        (
            "embed one short text, p50".into(),
            chroma["embed_short_ms"].as_f64(),
            hindsight["embed_short_ms"].as_f64(),
            "ms",
        ),
    ];
    let empty = Vec::new();
    for ours in hindsight["sizes"].as_array().unwrap_or(&empty) {
        let size = ours["size"].as_u64().unwrap_or(0);
        let theirs = peer_size(chroma, size);
        for (what, peer_key, our_key, unit) in [
            (
                "ingest with given vectors",
                "ingest_given_vectors_per_s",
                "ingest_given_vectors_per_s",
                "items/s",
            ),
            ("query p50 without embedding", "query_noembed_p50_ms", "recall_noembed_p50_ms", "ms"),
            ("query p50 with embedding", "query_embed_p50_ms", "recall_p50_ms", "ms"),
            ("disk bytes per memory", "bytes_per_memory", "bytes_per_memory", "bytes"),
        ] {
            rows.push((
                format!("{size} memories: {what}"),
                theirs[peer_key].as_f64(),
                ours[our_key].as_f64(),
                unit,
            ));
        }
    }
    let shown = |v: Option<f64>, unit: &str| match v {
        Some(v) if v >= 100.0 => format!("{v:.0} {unit}"),
        Some(v) => format!("{v:.1} {unit}"),
        None => "—".into(),
    };
    let mut out = format!(
        "| | Chroma {} + onnxruntime {} | hindsight (component, {}) |\n|---|---|---|\n",
        chroma["chroma_version"].as_str().unwrap_or("?"),
        chroma["onnxruntime_version"].as_str().unwrap_or("?"),
        hindsight["path"].as_str().unwrap_or("?"),
    );
    for (what, theirs, ours, unit) in rows.drain(..) {
        out.push_str(&format!("| {what} | {} | {} |\n", shown(theirs, unit), shown(ours, unit)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_pairs_each_figure_with_the_peers_and_marks_what_is_missing() {
        let ours = json!({
            "ingest_embed_items": 1451, "ingest_embed_per_s": 37.8, "query_embed_p50_ms": 12.5,
            "embed_short_ms": 19.5, "path": "encoder", "ingest_corpus_items": 512, "ingest_corpus_per_s": 120.0,
            "sizes": [{"size": 10000, "ingest_given_vectors_per_s": 11984.0, "recall_noembed_p50_ms": 1.7,
                       "recall_p50_ms": 13.1, "bytes_per_memory": 3581.0},
                      {"size": 100000, "recall_noembed_p50_ms": 4.2}],
        });
        let chroma = json!({
            "chroma_version": "1.5.9", "onnxruntime_version": "1.32.0", "ingest_embed_per_s": 88.8,
            "query_embed_p50_ms": 5.1, "embed_short_ms": 3.0, "ingest_corpus_per_s": 100.0,
            "sizes": [{"size": 10000, "ingest_given_vectors_per_s": 2360.2, "query_noembed_p50_ms": 1.44,
                       "query_embed_p50_ms": 4.6, "bytes_per_memory": 2945.7},
                      {"size": 100000, "skipped": "size 100000 needs 1..20000 vectors"}],
        });
        let table = table(&ours, &chroma);
        assert!(
            table.starts_with("| | Chroma 1.5.9 + onnxruntime 1.32.0 | hindsight (component, encoder) |"),
            "{table}"
        );
        assert!(table
            .contains("| ingest with embedding (1451 texts, 32 per call) | 88.8 items/s | 37.8 items/s |"));
        assert!(
            table.contains("| 10000 memories: query p50 without embedding | 1.4 ms | 1.7 ms |"),
            "{table}"
        );
        assert!(
            table.contains("| 10000 memories: ingest with given vectors | 2360 items/s | 11984 items/s |")
        );
        assert!(table.contains("| 100000 memories: query p50 without embedding | — | 4.2 ms |"), "{table}");
        assert!(
            table.contains(
                "| ingest with embedding (512 20-word texts, 32 per call) | 100 items/s | 120 items/s |"
            ),
            "{table}"
        );
        assert_eq!(table.lines().count(), 2 + 4 + 2 * 4);

        let rows = rows_by_size(&ours, &chroma);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["size"], 10000);
        assert_eq!(rows[0]["hindsight"]["query_noembed_p50_ms"], 1.7);
        assert_eq!(rows[0]["chroma"]["query_noembed_p50_ms"], 1.44);
        assert_eq!(rows[0]["hindsight"]["ingest_per_s"], 37.8);
        assert_eq!(rows[0]["chroma"]["embed_short_ms"], 3.0);
        assert_eq!(rows[0]["hindsight"]["path"], "encoder");
        assert_eq!(rows[1]["chroma"]["query_noembed_p50_ms"], Value::Null);
    }
}
