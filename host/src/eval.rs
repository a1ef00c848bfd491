//! `hindsight eval`: turn-level retrieval recall on LoCoMo-style JSONL, through the component.
//!
//! Protocol: each conversation is a bank; every turn is retained verbatim (no LLM) as
//! `<speaker>: <text>` (plus ` [image: <caption>]`), with the session date as its event time and
//! its dia_id in metadata. Each question recalls top k from its own bank with "now" at the
//! conversation's last session. recall@k = share of the question's evidence dia_ids in the top k,
//! averaged over questions with evidence.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::convert::{new_memory, parse_time, recall_query};
use crate::types::{NewMemory, RecallQuery};
use crate::{Host, HostConfig, SqliteKv};

#[derive(Debug, Deserialize)]
pub struct Turn {
    pub conv_id: String,
    pub dia_id: String,
    pub session_date: String,
    pub speaker: String,
    pub text: String,
    #[serde(default)]
    pub blip_caption: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Question {
    pub conv_id: String,
    pub question: String,
    pub category: u32,
    #[serde(default)]
    pub evidence: Vec<String>,
}

pub struct EvalOptions {
    pub ks: Vec<u32>,
    /// Where built banks are kept for the next run of the same turns (None: no cache).
    pub cache_dir: Option<PathBuf>,
}

/// Mean recall (percent) per k.
pub type RecallAtK = BTreeMap<u32, f64>;

pub struct EvalReport {
    pub questions: usize,
    pub overall: RecallAtK,
    pub cat1_4: RecallAtK,
    pub per_category: BTreeMap<u32, RecallAtK>,
    pub per_category_count: BTreeMap<u32, usize>,
    pub seconds: f64,
    pub bank_cache_hit: bool,
}

impl EvalReport {
    pub fn to_json(&self) -> Value {
        let table = |r: &RecallAtK| -> Value {
            Value::Object(
                r.iter().map(|(k, v)| (k.to_string(), json!((v * 100.0).round() / 100.0))).collect(),
            )
        };
        json!({
            "questions": self.questions,
            "overall": table(&self.overall),
            "cat1_4": table(&self.cat1_4),
            "per_category": Value::Object(self.per_category.iter().map(|(c, r)| (c.to_string(), table(r))).collect()),
            "seconds": (self.seconds * 10.0).round() / 10.0,
        })
    }

    pub fn to_table(&self) -> String {
        let ks: Vec<u32> = self.overall.keys().copied().collect();
        let mut out = format!("{:<22}{:>6}", "", "n");
        for k in &ks {
            out.push_str(&format!("{:>9}", format!("R@{k}")));
        }
        out.push('\n');
        let mut row = |name: &str, n: usize, r: &RecallAtK| {
            out.push_str(&format!("{name:<22}{n:>6}"));
            for k in &ks {
                out.push_str(&format!("{:>9.1}", r.get(k).copied().unwrap_or(0.0)));
            }
            out.push('\n');
        };
        row("overall", self.questions, &self.overall);
        let n14 = self.per_category_count.iter().filter(|(c, _)| (1..=4).contains(*c)).map(|(_, n)| n).sum();
        row("categories 1-4", n14, &self.cat1_4);
        for (c, r) in &self.per_category {
            row(&format!("category {c} ({})", category_name(*c)), self.per_category_count[c], r);
        }
        out.push_str(&format!("{:.1} s", self.seconds));
        out
    }
}

fn category_name(c: u32) -> &'static str {
    match c {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<(Vec<T>, Vec<u8>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let text = std::str::from_utf8(&bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        rows.push(serde_json::from_str(line).with_context(|| format!("{} line {}", path.display(), i + 1))?);
    }
    Ok((rows, bytes))
}

/// The part of the settings that shapes what `retain` stores: recall and lexical settings act
/// when recalling (indexes are rebuilt on open), so tuning them reuses the banks.
fn retain_settings(settings: &str) -> String {
    match serde_json::from_str::<Value>(settings) {
        Ok(Value::Object(mut map)) => {
            map.remove("recall");
            map.remove("lexical");
            Value::Object(map).to_string()
        }
        _ => settings.to_string(),
    }
}

/// Bank ids allow `[A-Za-z0-9._-]`: other characters of a conversation id become `_`.
fn bank_id(conv_id: &str) -> String {
    let id: String = conv_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .collect();
    format!("eval-{id}")
}

pub fn turn_text(t: &Turn) -> String {
    match t.blip_caption.as_deref().filter(|c| !c.trim().is_empty()) {
        Some(caption) => format!("{}: {} [image: {}]", t.speaker, t.text, caption),
        None => format!("{}: {}", t.speaker, t.text),
    }
}

/// Runs the protocol. `make_host` opens a host over the given store.
pub fn run(
    turns_path: &Path,
    questions_path: &Path,
    options: &EvalOptions,
    make_host: &dyn Fn(Arc<SqliteKv>, HostConfig) -> anyhow::Result<Host>,
    base_config: HostConfig,
    mut progress: impl FnMut(u64, u64),
) -> anyhow::Result<EvalReport> {
    let started = Instant::now();
    let (turns, turn_bytes): (Vec<Turn>, _) = read_jsonl(turns_path)?;
    let (questions, _): (Vec<Question>, _) = read_jsonl(questions_path)?;
    if options.ks.is_empty() || options.ks.contains(&0) {
        bail!("k: give one or more positive numbers, e.g. 5,10,25,50");
    }
    let max_k = *options.ks.iter().max().expect("ks is not empty");

    let mut conversations: BTreeMap<&str, Vec<&Turn>> = BTreeMap::new();
    for t in &turns {
        conversations.entry(t.conv_id.as_str()).or_default().push(t);
    }
    let mut last_session: HashMap<&str, i64> = HashMap::new();
    for (conv, ts) in &conversations {
        let mut latest = i64::MIN;
        for t in ts {
            latest = latest.max(parse_time("session_date", &t.session_date)?);
        }
        last_session.insert(conv, latest);
    }

    // Banks depend on the turns, the component (how it embeds) and the settings: all in the key.
    let work = tempfile::tempdir()?;
    let db = work.path().join("eval.db");
    let probe_host =
        make_host(Arc::new(SqliteKv::open(&work.path().join("probe.db"))?), base_config.clone())?;
    let key = crate::runtime::sha256_hex(
        format!(
            "{}\n{}\n{}",
            crate::runtime::sha256_hex(&turn_bytes),
            probe_host.component_sha256(),
            retain_settings(&base_config.settings)
        )
        .as_bytes(),
    );
    drop(probe_host);
    let cached = options.cache_dir.as_ref().map(|d| d.join(format!("locomo-{}.db", &key[..24])));
    let cache_hit = cached.as_ref().is_some_and(|c| c.is_file());
    if let (true, Some(c)) = (cache_hit, &cached) {
        // Work on a copy: recall records access, and the cache must stay as built.
        std::fs::copy(c, &db)?;
    }
    let kv = Arc::new(SqliteKv::open(&db)?);
    let mut host = make_host(kv.clone(), base_config)?;

    if !cache_hit {
        let total = turns.len() as u64;
        let mut done = 0u64;
        for (conv, ts) in &conversations {
            let bank = bank_id(conv);
            // One retain call per session: its turns are a sequence for the engine.
            let mut sessions: Vec<Vec<&Turn>> = Vec::new();
            for t in ts {
                match sessions.last_mut() {
                    Some(s) if s[0].session_date == t.session_date => s.push(t),
                    _ => sessions.push(vec![t]),
                }
            }
            for chunk in &sessions {
                let items = chunk
                    .iter()
                    .map(|t| {
                        Ok(NewMemory {
                            occurred_at: Some(parse_time("session_date", &t.session_date)?),
                            metadata: vec![("dia_id".to_string(), t.dia_id.clone())],
                            // The protocol retains every turn verbatim: no filter, dedup or merge.
                            force: true,
                            ..new_memory(&turn_text(t))
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let now = items.iter().filter_map(|i| i.occurred_at).max();
                host.retain(&bank, &items, now).map_err(anyhow::Error::new)?;
                done += chunk.len() as u64;
                progress(done, total);
            }
        }
        if let Some(c) = &cached {
            kv.checkpoint()?;
            if let Some(parent) = c.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let tmp = c.with_extension("partial");
            std::fs::copy(&db, &tmp)?;
            std::fs::rename(&tmp, c)?;
        }
    }

    let mut sums_all: RecallAtK = options.ks.iter().map(|k| (*k, 0.0)).collect();
    let mut sums_14 = sums_all.clone();
    let mut sums_cat: BTreeMap<u32, RecallAtK> = BTreeMap::new();
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    let (mut n_all, mut n_14) = (0usize, 0usize);
    for q in &questions {
        let evidence: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
        if evidence.is_empty() {
            continue;
        }
        let Some(&now) = last_session.get(q.conv_id.as_str()) else {
            bail!("question about conversation {:?}, which has no turns", q.conv_id);
        };
        let query =
            RecallQuery { now: Some(now), prompt_tokens: Some(0), ..recall_query(&q.question, max_k) };
        let result = host.recall(&bank_id(&q.conv_id), &query).map_err(anyhow::Error::new)?;
        let ranked: Vec<String> = result
            .items
            .iter()
            .map(|r| {
                r.memory
                    .metadata
                    .iter()
                    .find(|(k, _)| k == "dia_id")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            })
            .collect();
        let cat =
            sums_cat.entry(q.category).or_insert_with(|| options.ks.iter().map(|k| (*k, 0.0)).collect());
        for &k in &options.ks {
            let found = ranked.iter().take(k as usize).filter(|d| evidence.contains(d.as_str())).count();
            let r = found as f64 / evidence.len() as f64;
            *sums_all.get_mut(&k).unwrap() += r;
            *cat.get_mut(&k).unwrap() += r;
            if (1..=4).contains(&q.category) {
                *sums_14.get_mut(&k).unwrap() += r;
            }
        }
        n_all += 1;
        if (1..=4).contains(&q.category) {
            n_14 += 1;
        }
        *counts.entry(q.category).or_insert(0) += 1;
    }
    let mean = |sums: &RecallAtK, n: usize| -> RecallAtK {
        sums.iter().map(|(k, s)| (*k, if n == 0 { 0.0 } else { 100.0 * s / n as f64 })).collect()
    };
    Ok(EvalReport {
        questions: n_all,
        overall: mean(&sums_all, n_all),
        cat1_4: mean(&sums_14, n_14),
        per_category: sums_cat.iter().map(|(c, s)| (*c, mean(s, counts[c]))).collect(),
        per_category_count: counts,
        seconds: started.elapsed().as_secs_f64(),
        bank_cache_hit: cache_hit,
    })
}
