//! `hindsight-dev eval`: turn-level retrieval recall on LoCoMo-style JSONL, through the component.
//!
//! Protocol: each conversation is a bank; every turn is retained verbatim (no LLM) as
//! `<speaker>: <text>` (plus ` [image: <caption>]`), with the session date as its event time and
//! its dia_id in metadata. Each question recalls top k from its own bank with "now" at the
//! conversation's last session. recall@k = share of the question's evidence dia_ids in the top k,
//! averaged over questions with evidence.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hindsight::time::parse_iso;
use hindsight::{store::SqliteStore, Memory, Query, Settings};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{CliError, CliResult};
use crate::{EvalArgs, Global};

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

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> CliResult<(Vec<T>, Vec<u8>)> {
    let bytes = crate::read_input(path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| CliError::new("invalid-input", format!("{} is not UTF-8", path.display())))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row = serde_json::from_str(line)
            .map_err(|e| CliError::new("invalid-input", format!("{}: {e}", path.display())).at_line(i + 1))?;
        rows.push(row);
    }
    Ok((rows, bytes))
}

/// The part of the settings that shapes what `retain` stores: recall and lexical settings act
/// when recalling (indexes are rebuilt on open), so tuning them reuses the banks.
fn retain_settings(settings: &Settings) -> String {
    let mut v = serde_json::to_value(settings).expect("settings serialise");
    if let Some(map) = v.as_object_mut() {
        map.remove("recall");
        map.remove("lexical");
    }
    v.to_string()
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

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn io(e: std::io::Error) -> CliError {
    CliError::new("config", e.to_string())
}

pub fn run(g: &Global, builder: hindsight::Builder, settings: &Settings, args: &EvalArgs) -> CliResult<()> {
    let ks = hindsight::types::split_list(&args.k)
        .iter()
        .map(|k| k.parse::<u32>().map_err(|_| CliError::field("k", format!("{k:?} is not a whole number"))))
        .collect::<CliResult<Vec<_>>>()?;
    if ks.is_empty() || ks.contains(&0) {
        return Err(CliError::field("k", "give one or more positive numbers, e.g. 5,10,25,50"));
    }
    let bar = crate::progress(g, 0, "retaining turns {bar:40} {pos}/{len} {per_sec} eta {eta}");
    let cache_dir = (!args.no_cache).then(|| hindsight::defaults::cache_dir().join("eval"));
    let component = match &g.component {
        Some(path) => sha256_hex(&crate::read_input(path)?),
        None => hindsight::COMPONENT_SHA256.to_string(),
    };
    let banks = BankSource { builder, settings, component, cache_dir };
    let (Some(turns), Some(questions)) = (&args.turns, &args.questions) else {
        return Err(CliError::field("turns", "give --turns and --questions (or --pairs)"));
    };
    let report = evaluate(turns, questions, &ks, banks, |done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if g.json {
        println!("{}", report.to_json());
    } else {
        if report.bank_cache_hit {
            eprintln!("(banks reused from an earlier run on the same turns; --no-cache builds them afresh)");
        }
        println!("{}", report.to_table());
    }
    Ok(())
}

/// Runs the protocol; `cache_dir` keeps built banks for the next run of the same turns.
fn evaluate(
    turns_path: &Path,
    questions_path: &Path,
    ks: &[u32],
    banks: BankSource<'_>,
    mut progress: impl FnMut(u64, u64),
) -> CliResult<EvalReport> {
    let started = Instant::now();
    let (turns, turn_bytes): (Vec<Turn>, _) = read_jsonl(turns_path)?;
    let (questions, _): (Vec<Question>, _) = read_jsonl(questions_path)?;
    let max_k = *ks.iter().max().expect("ks is not empty");

    let mut conversations: BTreeMap<&str, Vec<&Turn>> = BTreeMap::new();
    for t in &turns {
        conversations.entry(t.conv_id.as_str()).or_default().push(t);
    }
    let mut last_session: HashMap<&str, i64> = HashMap::new();
    for (conv, ts) in &conversations {
        let mut latest = i64::MIN;
        for t in ts {
            latest = latest.max(parse_iso("session_date", &t.session_date)?);
        }
        last_session.insert(conv, latest);
    }

    // Banks depend on the turns, the component (how it embeds) and the settings: all in the key.
    let work = tempfile::tempdir().map_err(io)?;
    let db = work.path().join("eval.db");
    let key = sha256_hex(
        format!("{}\n{}\n{}", sha256_hex(&turn_bytes), banks.component, retain_settings(banks.settings))
            .as_bytes(),
    );
    let cached = banks.cache_dir.map(|d| d.join(format!("locomo-{}.db", &key[..24])));
    let cache_hit = cached.as_ref().is_some_and(|c| c.is_file());
    if let (true, Some(c)) = (cache_hit, &cached) {
        // Work on a copy: recall records access, and the cache must stay as built.
        std::fs::copy(c, &db).map_err(io)?;
    }
    let store = Arc::new(SqliteStore::open(&db)?);
    let hs = banks.builder.store(store.clone()).no_llm().open()?;

    if !cache_hit {
        let total = turns.len() as u64;
        let mut done = 0u64;
        for (conv, ts) in &conversations {
            let bank = hs.bank(&bank_id(conv))?;
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
                        // The protocol retains every turn verbatim: no filter, dedup or merge.
                        Ok(Memory::new(turn_text(t))
                            .occurred_at(parse_iso("session_date", &t.session_date)?)
                            .meta("dia_id", t.dia_id.clone())
                            .sequence()
                            .force())
                    })
                    .collect::<CliResult<Vec<_>>>()?;
                let now = items.iter().filter_map(|i| i.occurred_at).max().unwrap_or(0);
                bank.at(now).retain(items)?;
                done += chunk.len() as u64;
                progress(done, total);
            }
        }
        if let Some(c) = &cached {
            hindsight::store::Store::checkpoint(&*store)?;
            if let Some(parent) = c.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            let tmp = c.with_extension("partial");
            std::fs::copy(&db, &tmp).map_err(io)?;
            std::fs::rename(&tmp, c).map_err(io)?;
        }
    }

    let mut sums_all: RecallAtK = ks.iter().map(|k| (*k, 0.0)).collect();
    let mut sums_14 = sums_all.clone();
    let mut sums_cat: BTreeMap<u32, RecallAtK> = BTreeMap::new();
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    let (mut n_all, mut n_14) = (0usize, 0usize);
    // Every question embedded up front, across the workers; recall then runs on vectors.
    let asked: Vec<&str> = questions.iter().map(|q| q.question.as_str()).collect();
    let question_vectors = hs.embed(&asked)?;
    for (q, vector) in questions.iter().zip(question_vectors) {
        let evidence: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
        if evidence.is_empty() {
            continue;
        }
        let Some(&now) = last_session.get(q.conv_id.as_str()) else {
            return Err(CliError::new(
                "invalid-input",
                format!("question about conversation {:?}, which has no turns", q.conv_id),
            ));
        };
        let query = Query::new(q.question.clone()).vector(vector).k(max_k).at(now).prompt_tokens(0);
        let result = hs.bank(&bank_id(&q.conv_id))?.recall(query)?;
        let ranked: Vec<&str> =
            result.items.iter().map(|r| r.memory.meta("dia_id").unwrap_or_default()).collect();
        let cat = sums_cat.entry(q.category).or_insert_with(|| ks.iter().map(|k| (*k, 0.0)).collect());
        for &k in ks {
            let found = ranked.iter().take(k as usize).filter(|d| evidence.contains(*d)).count();
            let r = found as f64 / evidence.len() as f64;
            *sums_all.get_mut(&k).expect("every k") += r;
            *cat.get_mut(&k).expect("every k") += r;
            if (1..=4).contains(&q.category) {
                *sums_14.get_mut(&k).expect("every k") += r;
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

/// How the eval's banks are made: the host, its settings, the component's hash (banks built by
/// another component or settings are not reused) and where built banks are kept.
struct BankSource<'a> {
    builder: hindsight::Builder,
    settings: &'a Settings,
    component: String,
    cache_dir: Option<std::path::PathBuf>,
}
