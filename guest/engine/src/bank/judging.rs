//! What a new item is to the memories it is nearest: an update that replaces one, a duplicate
//! of one, a conflict where both hold, or something new. The LLM decides when the host lends
//! one (one `judge` call per retain, for every item that has candidates); the rules of
//! [`crate::judge`] decide otherwise, and wherever the LLM's answer does not cover a pair.

use std::collections::HashMap;

use hindsight_types::{Kind, Status};
use serde::Deserialize;

use super::Bank;
use crate::index::dot;
use crate::judge::{judge, Nature, Verdict};
use crate::llm::{parse_json, LlmError, LlmOperation, LlmRequest};
use crate::record::Record;
use crate::usage::OVER_BUDGET;

/// Neighbours looked at, from each of the vector and keyword rankings, before the nearest
/// `write.judge_candidates` are kept.
const NEIGHBOURS: usize = 8;

/// An active memory a new item is judged against.
pub(super) struct Candidate {
    pub id: String,
    pub cosine: f32,
}

/// What a new item is to one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Relation {
    Update,
    Duplicate,
    Compatible,
    /// They disagree, and both hold (under different conditions).
    BothHold,
}

impl Relation {
    fn parse(s: &str) -> Option<Relation> {
        Some(match s {
            "update" => Relation::Update,
            "duplicate" => Relation::Duplicate,
            "compatible" => Relation::Compatible,
            "conflict_both_hold" => Relation::BothHold,
            _ => return None,
        })
    }
}

/// A relation and why, and who said so.
#[derive(Debug, Clone)]
pub(super) struct Judged {
    pub relation: Relation,
    pub why: String,
}

/// The LLM's verdicts for one retain: by (item index in the call, candidate id).
#[derive(Default)]
pub(super) struct LlmVerdicts {
    by_pair: HashMap<(usize, String), Judged>,
    /// Set when the LLM was asked and its answer could not be used: the rules decided.
    pub fallback: Option<String>,
}

impl LlmVerdicts {
    pub fn get(&self, item: usize, candidate: &str) -> Option<&Judged> {
        self.by_pair.get(&(item, candidate.to_string()))
    }
}

const JUDGE_SCHEMA: &str = r#"{"type":"object","properties":{"judgements":{"type":"array","items":{"type":"object","properties":{"item":{"type":"integer","minimum":0},"candidate":{"type":"string"},"verdict":{"type":"string","enum":["update","duplicate","compatible","conflict_both_hold"]},"reason":{"type":"string"}},"required":["item","candidate","verdict"]}}},"required":["judgements"]}"#;

#[derive(Deserialize)]
struct JudgeAnswer {
    judgements: Vec<PairAnswer>,
}

#[derive(Deserialize)]
struct PairAnswer {
    item: usize,
    candidate: String,
    verdict: String,
    #[serde(default)]
    reason: Option<String>,
}

impl Bank {
    /// The active memories of `m`'s scope nearest it (by vector or sharing words), at most
    /// `write.judge_candidates`, nearest first.
    pub(super) fn candidates(&self, m: &Record, vector: &[f32]) -> Vec<Candidate> {
        let state = &self.state;
        let w = &self.settings.write;
        let same_scope = |slot: u32| {
            state.slots[slot as usize].as_ref().is_some_and(|o| o.is_active() && o.scope == m.scope)
        };
        let mut found: Vec<(u32, f32, bool)> = state
            .search_vectors(vector, NEIGHBOURS, same_scope)
            .into_iter()
            .map(|(s, c)| (s, c, false))
            .collect();
        for (slot, _) in state.lexical.search(&m.content, &self.settings.lexical, NEIGHBOURS, same_scope) {
            match found.iter_mut().find(|(s, _, _)| *s == slot) {
                Some(f) => f.2 = true,
                None => found.push((slot, state.vector(slot).map_or(0.0, |v| dot(vector, v)), true)),
            }
        }
        let mut out: Vec<Candidate> = found
            .into_iter()
            .filter(|&(_, cosine, shares_words)| cosine >= w.judge_min_cosine || shares_words)
            .filter_map(|(slot, cosine, _)| {
                state.slots[slot as usize].as_ref().map(|o| Candidate { id: o.id.clone(), cosine })
            })
            .collect();
        out.sort_by(|a, b| b.cosine.total_cmp(&a.cosine).then_with(|| a.id.cmp(&b.id)));
        out.truncate(w.judge_candidates as usize);
        out
    }

    /// The verdict without an LLM (the rules, weighed) on `new` (a conversation's turn when `turn`)
    /// against `old`.
    pub(super) fn judge_without_llm(old: &Record, new: &Record, cosine: f32, turn: bool) -> Judged {
        // A preference or constraint is a statement that can change, whatever its kind.
        let statement = |m: &Record| {
            m.kind != Kind::Episodic
                || m.has_tag(crate::record::TAG_PREFERENCE)
                || m.has_tag(crate::record::TAG_CONSTRAINT)
        };
        let nature = if turn {
            Nature::Turn
        } else if statement(old) && statement(new) {
            Nature::Statement
        } else {
            Nature::Episode
        };
        let j = judge(&old.content, &new.content, cosine, nature);
        let relation = match j.verdict {
            Verdict::Update => Relation::Update,
            Verdict::Duplicate => Relation::Duplicate,
            Verdict::Compatible => Relation::Compatible,
        };
        Judged { relation, why: j.why }
    }

    /// One `judge` call for every item with candidates (none when no item has any, or the host
    /// lends no LLM). `items`: (index in the call, the new record, its candidates).
    pub(super) fn judge_by_llm(&self, items: &[(usize, &Record, Vec<Candidate>)]) -> LlmVerdicts {
        let asked: Vec<&(usize, &Record, Vec<Candidate>)> =
            items.iter().filter(|(_, _, c)| !c.is_empty()).collect();
        if asked.is_empty() {
            return LlmVerdicts::default();
        }
        let mut prompt = String::from(
            "An agent's memory holds the existing memories below. For each new memory, judge it \
             against each of its existing ones:\n\
             - update: the new one replaces it (the fact changed, or the old one was wrong);\n\
             - duplicate: the same fact said again;\n\
             - compatible: both are true (about different things, or the new one adds detail);\n\
             - conflict_both_hold: they disagree, but both hold under different conditions.\n\
             Answer with one judgement per pair.\n",
        );
        let mut pairs = 0;
        for (item, record, candidates) in &asked {
            prompt.push_str(&format!("\nNew memory {item}: {}\n", record.content));
            for c in candidates {
                if let Some(old) = self.state.memory(&c.id) {
                    prompt.push_str(&format!("  existing {}: {}\n", old.id, old.content));
                    pairs += 1;
                }
            }
        }
        let request = LlmRequest {
            operation: LlmOperation::Judge,
            system: "You keep an agent's long-term memory consistent. Answer with JSON only.".into(),
            prompt,
            json_schema: Some(JUDGE_SCHEMA.into()),
            max_tokens: 32 + 48 * pairs,
            temperature: 0.0,
        };
        let answer = match self.llm.complete(&request) {
            Err(LlmError::Unavailable(why)) if why.starts_with(OVER_BUDGET) => {
                return LlmVerdicts { fallback: Some(why), ..Default::default() }
            }
            Err(LlmError::Unavailable(_)) => return LlmVerdicts::default(),
            Err(LlmError::Failed(e)) => Err(e),
            Ok(response) => parse_json::<JudgeAnswer>(&response.text),
        };
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                return LlmVerdicts {
                    fallback: Some(format!("the LLM's judgement was unusable ({e})")),
                    ..Default::default()
                }
            }
        };
        let mut verdicts = LlmVerdicts::default();
        let mut ignored = 0;
        for pair in answer.judgements {
            let known = asked
                .iter()
                .find(|(item, _, _)| *item == pair.item)
                .is_some_and(|(_, _, cands)| cands.iter().any(|c| c.id == pair.candidate));
            match Relation::parse(&pair.verdict).filter(|_| known) {
                Some(relation) => {
                    let why =
                        pair.reason.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| pair.verdict.clone());
                    verdicts.by_pair.insert((pair.item, pair.candidate), Judged { relation, why });
                }
                None => ignored += 1,
            }
        }
        if verdicts.by_pair.is_empty() {
            verdicts.fallback = Some("the LLM judged no pair it was asked about".into());
        } else if ignored > 0 {
            verdicts.fallback =
                Some(format!("{ignored} of the LLM's judgements named no pair it was asked about"));
        }
        verdicts
    }

    /// Whether `m` is a superseded memory the user said holds beside `other`.
    pub(super) fn holds_beside(&self, m: &str, other: &str) -> bool {
        self.state
            .memory(m)
            .is_some_and(|r| r.conflicts_with.iter().any(|c| c == other) && r.status != Status::Superseded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_names_are_the_schemas() {
        for name in ["update", "duplicate", "compatible", "conflict_both_hold"] {
            assert!(Relation::parse(name).is_some(), "{name}");
            assert!(JUDGE_SCHEMA.contains(name));
        }
        assert!(Relation::parse("replaces").is_none());
    }
}
