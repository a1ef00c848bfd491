//! `hindsight-dev eval --pairs`: the write path's decisions on labelled pairs of statements.
//!
//! For each pair: a fresh bank, `old` retained, then `new` (both with the pair's kind, the
//! default settings but secrets stored as given, and the LLM if one is configured); the second retain's action is the
//! decision — superseded → supersede, reinforced or merged → duplicate, created → keep_both
//! (filtered counts as a wrong answer of its own).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use hindsight::{
    types::{Named, RetainAction},
    Kind, Memory,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{CliError, CliResult};
use crate::Global;

pub const LABELS: [&str; 3] = ["supersede", "duplicate", "keep_both"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    pub id: String,
    #[serde(default)]
    pub lang: Option<String>,
    pub old: String,
    pub new: String,
    #[serde(default)]
    pub kind: Option<String>,
    pub label: String,
}

/// Reads the pairs, each line checked (its number and field named).
pub fn read_pairs(path: &Path) -> CliResult<Vec<Pair>> {
    let text = String::from_utf8(crate::read_input(path)?)
        .map_err(|e| CliError::field("pairs", format!("{} is not UTF-8: {e}", path.display())))?;
    let mut pairs = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = |field: &str, message: String| CliError::field(field, message).at_line(n + 1);
        let pair: Pair = serde_json::from_str(line).map_err(|e| at("pairs", format!("not a pair: {e}")))?;
        if !LABELS.contains(&pair.label.as_str()) {
            return Err(at("label", format!("{:?} is not one of {}", pair.label, LABELS.join(", "))));
        }
        if let Some(kind) = &pair.kind {
            Kind::parse("kind", kind).map_err(|e| at("kind", e.message))?;
        }
        pairs.push(pair);
    }
    if pairs.is_empty() {
        return Err(CliError::field("pairs", format!("{} holds no pairs", path.display())));
    }
    Ok(pairs)
}

fn decision(action: RetainAction) -> &'static str {
    match action {
        RetainAction::Superseded => "supersede",
        RetainAction::Reinforced | RetainAction::Merged => "duplicate",
        RetainAction::Created => "keep_both",
        RetainAction::Filtered => "filtered",
        _ => "other",
    }
}

pub fn run(g: &Global, builder: hindsight::Builder, path: &Path) -> CliResult<()> {
    let pairs = read_pairs(path)?;
    // The pairs measure the judgement: a secret's value redacted on both sides would turn every
    // "the password is now …" update into a duplicate.
    let hs = builder
        .settings(|s| {
            s.defence.secrets = hindsight::settings::DefenceAction::Allow;
            s.defence.personal = hindsight::settings::DefenceAction::Allow;
        })
        .memory()
        .open()?;
    let started = Instant::now();
    let bar = crate::progress(g, pairs.len() as u64, "judging pairs {bar:40} {pos}/{len} eta {eta}");
    // confusion[label][decision]
    let mut confusion: BTreeMap<&str, BTreeMap<&str, u32>> = BTreeMap::new();
    let mut errors = Vec::new();
    // (right, total) by language
    let mut by_lang: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for (i, pair) in pairs.iter().enumerate() {
        let bank = hs.bank(&format!("pair-{i}"))?;
        let kind =
            Kind::parse("kind", pair.kind.as_deref().unwrap_or("semantic")).expect("checked when read");
        bank.retain([Memory::new(pair.old.clone()).kind(kind)])?;
        let outcome = bank.retain([Memory::new(pair.new.clone()).kind(kind)])?.remove(0);
        let got = decision(outcome.action);
        let label = LABELS.iter().find(|l| **l == pair.label).expect("checked when read");
        *confusion.entry(label).or_default().entry(got).or_default() += 1;
        let lang = by_lang.entry(pair.lang.clone().unwrap_or_else(|| "?".into())).or_default();
        lang.1 += 1;
        if got == *label {
            lang.0 += 1;
        } else {
            errors.push(pair.id.clone());
        }
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = Report::new(pairs.len(), confusion, errors, started.elapsed().as_secs_f64());
    let accuracy_by_lang: BTreeMap<&str, f64> = by_lang
        .iter()
        .map(|(l, (right, n))| (l.as_str(), (f64::from(*right) / f64::from(*n) * 1000.0).round() / 1000.0))
        .collect();
    if g.json {
        let mut v = report.to_json();
        v["accuracy_by_lang"] = json!(accuracy_by_lang);
        v["llm_usage"] = serde_json::to_value(hs.llm_usage()?).expect("usage serialises");
        println!("{v}");
    } else {
        println!("{}", report.to_table());
        let langs: Vec<String> = accuracy_by_lang.iter().map(|(l, a)| format!("{l} {a:.3}")).collect();
        println!("accuracy by language: {}", langs.join(", "));
    }
    Ok(())
}

pub struct Report<'a> {
    pub pairs: usize,
    pub confusion: BTreeMap<&'a str, BTreeMap<&'a str, u32>>,
    pub errors: Vec<String>,
    pub seconds: f64,
}

impl<'a> Report<'a> {
    pub fn new(
        pairs: usize,
        confusion: BTreeMap<&'a str, BTreeMap<&'a str, u32>>,
        errors: Vec<String>,
        seconds: f64,
    ) -> Report<'a> {
        Report { pairs, confusion, errors, seconds }
    }

    fn count(&self, label: &str, decided: &str) -> u32 {
        self.confusion.get(label).and_then(|m| m.get(decided)).copied().unwrap_or(0)
    }

    /// (precision, recall, f1) of one decision.
    pub fn scores(&self, label: &str) -> (f64, f64, f64) {
        let tp = f64::from(self.count(label, label));
        let decided: f64 = LABELS.iter().map(|l| f64::from(self.count(l, label))).sum();
        let actual: f64 = self.confusion.get(label).map_or(0, |m| m.values().sum::<u32>()).into();
        let precision = if decided > 0.0 { tp / decided } else { 0.0 };
        let recall = if actual > 0.0 { tp / actual } else { 0.0 };
        let f1 = if precision + recall > 0.0 { 2.0 * precision * recall / (precision + recall) } else { 0.0 };
        (precision, recall, f1)
    }

    pub fn accuracy(&self) -> f64 {
        let right: u32 = LABELS.iter().map(|l| self.count(l, l)).sum();
        f64::from(right) / self.pairs.max(1) as f64
    }

    pub fn to_json(&self) -> Value {
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        let per_label: serde_json::Map<String, Value> = LABELS
            .iter()
            .map(|l| {
                let (p, r, f) = self.scores(l);
                (l.to_string(), json!({"precision": round(p), "recall": round(r), "f1": round(f)}))
            })
            .collect();
        json!({
            "pairs": self.pairs,
            "accuracy": round(self.accuracy()),
            "per_label": per_label,
            "confusion": self.confusion,
            "errors": self.errors,
            "seconds": (self.seconds * 10.0).round() / 10.0,
        })
    }

    pub fn to_table(&self) -> String {
        let mut out = format!("{} pairs, accuracy {:.3}\n\n", self.pairs, self.accuracy());
        out.push_str(&format!(
            "{:<12}{:>10}{:>10}{:>10}   decided as: {}\n",
            "label",
            "precision",
            "recall",
            "f1",
            LABELS.join(" / ")
        ));
        for l in LABELS {
            let (p, r, f) = self.scores(l);
            let row: Vec<String> = LABELS.iter().map(|d| self.count(l, d).to_string()).collect();
            let filtered = self.count(l, "filtered");
            let extra = if filtered > 0 { format!(" (+{filtered} filtered)") } else { String::new() };
            out.push_str(&format!("{l:<12}{p:>10.3}{r:>10.3}{f:>10.3}   {}{extra}\n", row.join(" / ")));
        }
        if !self.errors.is_empty() {
            out.push_str(&format!("\nwrong: {}", self.errors.join(" ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_follow_the_confusion_matrix() {
        let mut confusion: BTreeMap<&str, BTreeMap<&str, u32>> = BTreeMap::new();
        confusion.entry("supersede").or_default().insert("supersede", 3);
        confusion.entry("supersede").or_default().insert("keep_both", 1);
        confusion.entry("keep_both").or_default().insert("keep_both", 4);
        confusion.entry("keep_both").or_default().insert("supersede", 1);
        let r = Report::new(9, confusion, vec![], 0.0);
        let (p, rc, _) = r.scores("supersede");
        assert!((p - 0.75).abs() < 1e-9 && (rc - 0.75).abs() < 1e-9);
        assert!((r.accuracy() - 7.0 / 9.0).abs() < 1e-9);
        assert_eq!(r.to_json()["per_label"]["keep_both"]["precision"], 0.8);
    }
}
