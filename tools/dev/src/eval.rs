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
    #[serde(default)]
    pub qid: Option<String>,
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
    /// Each question with evidence, in file order: what `--compare` pairs up.
    pub per_question: Vec<QuestionRecall>,
    pub seconds: f64,
}

/// One question's recall at each k (a share, 0..1).
pub struct QuestionRecall {
    pub qid: String,
    pub category: u32,
    pub recall: RecallAtK,
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
            "per_question": self.per_question.iter().map(|q| json!({
                "qid": q.qid,
                "category": q.category,
                "recall": Value::Object(q.recall.iter().map(|(k, v)| (k.to_string(), json!(v))).collect()),
            })).collect::<Vec<_>>(),
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

pub fn category_name(c: u32) -> &'static str {
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

/// The recall arms `--ablate` turns off: name, what it does, and how to turn it off.
type Arm = (&'static str, &'static str, fn(&mut Settings));
const ARMS: [Arm; 9] = [
    ("person_prior", "recall.person_prior: the speaker prior of list and would-questions", |s| {
        s.recall.person_prior = 0.0
    }),
    ("question_penalty", "recall.question_penalty: a memory that mostly asks counts less", |s| {
        s.recall.question_penalty = 0.0
    }),
    ("addressee_penalty", "recall.addressee_penalty: a turn about the one it addresses counts less", |s| {
        s.recall.addressee_penalty = 0.0
    }),
    ("gathering_lexical", "recall.gathering_lexical_scale: list questions weigh keywords less", |s| {
        s.recall.gathering_lexical_scale = 1.0
    }),
    (
        "entity_expansion",
        "recall.entity_expansion: the names the best hits hold lead to other memories",
        |s| s.recall.entity_expansion = 0.0,
    ),
    (
        "embed_without_names",
        "recall.embed_without_names: the query is embedded with its speakers as \"they\"",
        |s| s.recall.embed_without_names = false,
    ),
    ("sentence_keys", "recall.sentence_keys: a memory's best sentence counts in its similarity", |s| {
        s.recall.sentence_keys = false
    }),
    ("context_previous", "lexical.context_previous: a turn's keywords include its predecessor's", |s| {
        s.lexical.context_previous = 0
    }),
    ("index_dates", "lexical.index_dates: a memory's keywords include its month and year", |s| {
        s.lexical.index_dates = false
    }),
];

fn without_arm(settings: &Settings, arm: &str) -> Settings {
    let mut s = settings.clone();
    if let Some((_, _, turn_off)) = ARMS.iter().find(|(a, _, _)| *a == arm) {
        turn_off(&mut s);
    }
    s
}

/// An arm is on when turning it off changes the settings.
fn arm_is_on(settings: &Settings, arm: &str) -> bool {
    without_arm(settings, arm) != *settings
}

/// The arms `--ablate` names: known ones, each on in `settings` (`all`: every arm that is on).
fn ablated_arms(list: &str, settings: &Settings) -> CliResult<Vec<&'static str>> {
    let names = hindsight::types::split_list(list);
    if names.iter().any(|n| n == "all") {
        return Ok(ARMS.iter().map(|(a, _, _)| *a).filter(|a| arm_is_on(settings, a)).collect());
    }
    let mut arms = Vec::new();
    for name in &names {
        let Some((arm, _, _)) = ARMS.iter().find(|(a, _, _)| a == name) else {
            let known: Vec<&str> = ARMS.iter().map(|(a, _, _)| *a).collect();
            return Err(CliError::field(
                "ablate",
                format!("{name:?} is not an arm; arms: {}, or all", known.join(", ")),
            ));
        };
        if !arm_is_on(settings, arm) {
            return Err(CliError::field("ablate", format!("{arm} is already off in these settings")));
        }
        arms.push(*arm);
    }
    if arms.is_empty() {
        return Err(CliError::field("ablate", "name one or more arms, or all"));
    }
    Ok(arms)
}

pub fn run(g: &Global, settings: &Settings, args: &EvalArgs) -> CliResult<()> {
    let ks = hindsight::types::split_list(&args.k)
        .iter()
        .map(|k| k.parse::<u32>().map_err(|_| CliError::field("k", format!("{k:?} is not a whole number"))))
        .collect::<CliResult<Vec<_>>>()?;
    if ks.is_empty() || ks.contains(&0) {
        return Err(CliError::field("k", "give one or more positive numbers, e.g. 5,10,25,50"));
    }
    let arms = match &args.ablate {
        Some(list) => ablated_arms(list, settings)?,
        None => Vec::new(),
    };
    let bar = crate::progress(g, 0, "retaining turns {bar:40} {pos}/{len} {per_sec} eta {eta}");
    let cache_dir = (!args.no_cache).then(|| hindsight::defaults::cache_dir().join("eval"));
    let component = match &g.component {
        Some(path) => sha256_hex(&crate::read_input(path)?),
        None => hindsight::COMPONENT_SHA256.to_string(),
    };
    let (Some(turns), Some(questions)) = (&args.turns, &args.questions) else {
        return Err(CliError::field("turns", "give --turns and --questions (or --pairs, or --compare)"));
    };
    let source = BankSource { g, settings, component, cache_dir };
    let banks = build_banks(turns, &source, |done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let (questions, _): (Vec<Question>, _) = read_jsonl(questions)?;
    let report = evaluate(g, &banks, &questions, &ks, settings)?;
    let mut ablations = Vec::new();
    for arm in arms {
        ablations.push((arm, evaluate(g, &banks, &questions, &ks, &without_arm(settings, arm))?));
    }
    if g.json {
        let mut v = report.to_json();
        if !ablations.is_empty() {
            v["ablations"] =
                Value::Object(ablations.iter().map(|(a, r)| (a.to_string(), r.to_json())).collect());
        }
        println!("{v}");
    } else {
        if banks.cache_hit {
            eprintln!("(banks reused from an earlier run on the same turns; --no-cache builds them afresh)");
        }
        println!("{}", report.to_table());
        if !ablations.is_empty() {
            println!("\n{}", ablation_table(&report, &ablations));
        }
    }
    Ok(())
}

/// What each arm adds: the full run's recall at each k per category, and the change when the
/// arm is turned off.
fn ablation_table(full: &EvalReport, ablations: &[(&str, EvalReport)]) -> String {
    let ks: Vec<u32> = full.overall.keys().copied().collect();
    let mut out = String::from("recall with every arm, and the change with one arm off\n");
    out.push_str(&format!("{:<22}{:<18}", "", "run"));
    for k in &ks {
        out.push_str(&format!("{:>9}", format!("R@{k}")));
    }
    out.push('\n');
    let mut rows: Vec<(String, Option<u32>)> =
        vec![("overall".into(), None), ("categories 1-4".into(), Some(0))];
    rows.extend(full.per_category.keys().map(|&c| (format!("category {c} ({})", category_name(c)), Some(c))));
    let pick = |r: &'_ EvalReport, row: Option<u32>| -> Option<RecallAtK> {
        match row {
            None => Some(r.overall.clone()),
            Some(0) => Some(r.cat1_4.clone()),
            Some(c) => r.per_category.get(&c).cloned(),
        }
    };
    for (name, row) in rows {
        let Some(base) = pick(full, row) else { continue };
        out.push_str(&format!("{name:<22}{:<18}", "all arms"));
        for k in &ks {
            out.push_str(&format!("{:>9.1}", base.get(k).copied().unwrap_or(0.0)));
        }
        out.push('\n');
        for (arm, report) in ablations {
            let Some(r) = pick(report, row) else { continue };
            out.push_str(&format!("{:<22}{:<18}", "", format!("-{arm}")));
            for k in &ks {
                let d = r.get(k).copied().unwrap_or(0.0) - base.get(k).copied().unwrap_or(0.0);
                out.push_str(&format!("{:>+9.1}", d));
            }
            out.push('\n');
        }
    }
    for (arm, _) in ablations {
        if let Some((_, what, _)) = ARMS.iter().find(|(a, _, _)| a == arm) {
            out.push_str(&format!("-{arm}: {what}\n"));
        }
    }
    out
}

/// The banks of one turns file, built (or taken from the cache) once and copied for each run.
struct BuiltBanks {
    _work: tempfile::TempDir,
    db: std::path::PathBuf,
    last_session: HashMap<String, i64>,
    cache_hit: bool,
}

/// Retains every conversation's turns (see the protocol above), or finds the banks an earlier
/// run built from the same turns, component and write settings.
fn build_banks(
    turns_path: &Path,
    source: &BankSource<'_>,
    mut progress: impl FnMut(u64, u64),
) -> CliResult<BuiltBanks> {
    let (turns, turn_bytes): (Vec<Turn>, _) = read_jsonl(turns_path)?;
    let mut conversations: BTreeMap<&str, Vec<&Turn>> = BTreeMap::new();
    for t in &turns {
        conversations.entry(t.conv_id.as_str()).or_default().push(t);
    }
    let mut last_session: HashMap<String, i64> = HashMap::new();
    for (conv, ts) in &conversations {
        let mut latest = i64::MIN;
        for t in ts {
            latest = latest.max(parse_iso("session_date", &t.session_date)?);
        }
        last_session.insert(conv.to_string(), latest);
    }

    // Banks depend on the turns, the component (how it embeds) and the settings: all in the key.
    let work = tempfile::tempdir().map_err(io)?;
    let db = work.path().join("built.db");
    let key = sha256_hex(
        format!("{}\n{}\n{}", sha256_hex(&turn_bytes), source.component, retain_settings(source.settings))
            .as_bytes(),
    );
    let cached = source.cache_dir.as_ref().map(|d| d.join(format!("locomo-{}.db", &key[..24])));
    let cache_hit = cached.as_ref().is_some_and(|c| c.is_file());
    if let (true, Some(c)) = (cache_hit, &cached) {
        std::fs::copy(c, &db).map_err(io)?;
        return Ok(BuiltBanks { _work: work, db, last_session, cache_hit });
    }
    let store = Arc::new(SqliteStore::open(&db)?);
    let hs = crate::builder(source.g, None)?
        .with_settings(source.settings.clone())
        .store(store.clone())
        .no_llm()
        .open()?;
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
    hindsight::store::Store::checkpoint(&*store)?;
    drop(hs);
    if let Some(c) = &cached {
        if let Some(parent) = c.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let tmp = c.with_extension("partial");
        std::fs::copy(&db, &tmp).map_err(io)?;
        std::fs::rename(&tmp, c).map_err(io)?;
    }
    Ok(BuiltBanks { _work: work, db, last_session, cache_hit })
}

/// Asks every question of its conversation's bank, with `settings`, on a copy of the built banks
/// (recall records use, and each run must start from the banks as built).
fn evaluate(
    g: &Global,
    banks: &BuiltBanks,
    questions: &[Question],
    ks: &[u32],
    settings: &Settings,
) -> CliResult<EvalReport> {
    let started = Instant::now();
    let max_k = *ks.iter().max().expect("ks is not empty");
    let work = tempfile::tempdir().map_err(io)?;
    let db = work.path().join("eval.db");
    std::fs::copy(&banks.db, &db).map_err(io)?;
    let store = Arc::new(SqliteStore::open(&db)?);
    let hs = crate::builder(g, None)?.with_settings(settings.clone()).store(store).no_llm().open()?;

    let mut per_question = Vec::new();
    // Recall embeds each question itself, as it would a user's: what it embeds depends on the
    // settings (recall.embed_without_names) and the bank (its speakers).
    for (n, q) in questions.iter().enumerate() {
        let evidence: HashSet<&str> = q.evidence.iter().map(String::as_str).collect();
        if evidence.is_empty() {
            continue;
        }
        let Some(&now) = banks.last_session.get(q.conv_id.as_str()) else {
            return Err(CliError::new(
                "invalid-input",
                format!("question about conversation {:?}, which has no turns", q.conv_id),
            ));
        };
        let query = Query::new(q.question.clone()).k(max_k).at(now).prompt_tokens(0);
        let result = hs.bank(&bank_id(&q.conv_id))?.recall(query)?;
        let ranked: Vec<&str> =
            result.items.iter().map(|r| r.memory.meta("dia_id").unwrap_or_default()).collect();
        let recall = ks
            .iter()
            .map(|&k| {
                let found = ranked.iter().take(k as usize).filter(|d| evidence.contains(*d)).count();
                (k, found as f64 / evidence.len() as f64)
            })
            .collect();
        per_question.push(QuestionRecall {
            qid: q.qid.clone().unwrap_or_else(|| format!("{}:{n}", q.conv_id)),
            category: q.category,
            recall,
        });
    }
    let mut per_category_count: BTreeMap<u32, usize> = BTreeMap::new();
    for q in &per_question {
        *per_category_count.entry(q.category).or_insert(0) += 1;
    }
    let of_category = |c: u32| per_question.iter().filter(move |q| q.category == c);
    Ok(EvalReport {
        questions: per_question.len(),
        overall: mean_recall(&per_question, ks),
        cat1_4: mean_recall(per_question.iter().filter(|q| (1..=4).contains(&q.category)), ks),
        per_category: per_category_count.keys().map(|&c| (c, mean_recall(of_category(c), ks))).collect(),
        per_category_count,
        per_question,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Mean recall (percent) at each k over some questions, summed in the order given; 0 for none.
pub fn mean_recall<'a>(questions: impl IntoIterator<Item = &'a QuestionRecall>, ks: &[u32]) -> RecallAtK {
    let mut sums: RecallAtK = ks.iter().map(|k| (*k, 0.0)).collect();
    let mut n = 0usize;
    for q in questions {
        n += 1;
        for (k, sum) in sums.iter_mut() {
            *sum += q.recall.get(k).copied().unwrap_or(0.0);
        }
    }
    sums.into_iter().map(|(k, s)| (k, if n == 0 { 0.0 } else { 100.0 * s / n as f64 })).collect()
}

/// How the eval's banks are made: the global flags (the host), its settings, the component's
/// hash (banks built by another component or settings are not reused) and where built banks
/// are kept.
struct BankSource<'a> {
    g: &'a Global,
    settings: &'a Settings,
    component: String,
    cache_dir: Option<std::path::PathBuf>,
}
