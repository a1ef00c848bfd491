//! The health report: what a bank keeps that it should not, each finding with the command that
//! fixes it. Duplicates and stale memories are what `maintain` would merge and archive (so
//! running it clears them); pairs it does not touch are judged by the write path's own rules,
//! so the report flags what a retain would have decided differently.

use std::collections::{BTreeMap, BTreeSet};

use hindsight_types::time::{date, Timestamp};
use hindsight_types::{DayCount, HealthFinding, HealthKind, HealthReport, MaintainAction};

use super::judging::Relation;
use super::Bank;
use crate::defence::secrets::REDACTED_MARK;
use crate::record::{Record, TAG_UNTRUSTED};
use crate::Result;

/// Active memories compared with their neighbours, newest first: each costs a search, and past
/// this a report would take minutes.
const PAIRS_CHECKED: usize = 20_000;
/// Days of growth reported.
const GROWTH_DAYS: usize = 30;

/// The kinds of archiving `maintain` reports, by the start of its reason: stale memories are
/// listed together by kind rather than one finding each.
const STALE_KINDS: &[(&str, &str)] = &[
    ("expired", "past their valid_until"),
    ("confidence", "under maintain.archive_below_confidence and idle for maintain.archive_idle_days"),
    ("an episode never recalled", "episodes never recalled in maintain.episodic_archive_days"),
    ("never useful", "recalled audit.unused_after times, never useful (maintain.archive_unused)"),
    ("over capacity", "the least valuable beyond maintain.capacity"),
];

impl Bank {
    /// The bank's health at `now`. Changes nothing.
    pub fn health(&mut self, now: Timestamp) -> Result<HealthReport> {
        let plan = self.maintain_dry_run(now)?;
        let maintain = self.command("maintain");
        let mut findings = Vec::new();
        let mut settled: BTreeSet<(String, String)> = BTreeSet::new();
        let mut stale: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for step in plan.steps {
            match (step.action, step.into) {
                (MaintainAction::Merged, Some(into)) => {
                    settled.insert(pair(&step.id, &into));
                    findings.push(HealthFinding {
                        kind: HealthKind::Duplicate,
                        detail: format!("{} is {}", step.id, step.reason),
                        ids: vec![step.id, into],
                        fix: maintain.clone(),
                    });
                }
                _ => {
                    let kind = STALE_KINDS
                        .iter()
                        .find(|(start, _)| step.reason.starts_with(start))
                        .map_or("archived by maintain", |(_, kind)| kind);
                    stale.entry(kind).or_default().push(step.id);
                }
            }
        }
        let archiving: BTreeSet<&String> = stale.values().flatten().collect();

        let mut active: Vec<&Record> = self.state.slots.iter().flatten().filter(|m| m.is_active()).collect();
        active.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
        let checked = active.len().min(PAIRS_CHECKED);
        for &m in &active[..checked] {
            if archiving.contains(&m.id) {
                continue;
            }
            for other in &m.conflicts_with {
                let Some(o) = self.state.memory(other).filter(|o| o.is_active() && older(o, m)) else {
                    continue;
                };
                if archiving.contains(&o.id) || !settled.insert(pair(&o.id, &m.id)) {
                    continue;
                }
                findings.push(HealthFinding {
                    kind: HealthKind::Contradiction,
                    ids: vec![o.id.clone(), m.id.clone()],
                    detail: format!(
                        "{} and {} disagree and were kept both as each holding under its own conditions; \
                         forget the one that no longer holds",
                        o.id, m.id
                    ),
                    fix: self.command(&format!("forget {}", o.id)),
                });
            }
            let Some(vector) = self.state.by_id.get(&m.id).and_then(|&slot| self.state.vector(slot)) else {
                continue;
            };
            for c in self.candidates(m, vector) {
                let Some(o) = self.state.memory(&c.id).filter(|o| older(o, m)) else { continue };
                if archiving.contains(&o.id) || settled.contains(&pair(&o.id, &m.id)) {
                    continue;
                }
                let judged = Self::judge_without_llm(o, m, c.cosine, m.follows.is_some());
                let finding = match judged.relation {
                    Relation::Duplicate => HealthFinding {
                        kind: HealthKind::Duplicate,
                        ids: vec![m.id.clone(), o.id.clone()],
                        detail: format!(
                            "{} restates {} ({}, cosine {:.3}); both are active",
                            m.id, o.id, judged.why, c.cosine
                        ),
                        fix: self.command(&format!("forget {}", m.id)),
                    },
                    Relation::Update => HealthFinding {
                        kind: HealthKind::Contradiction,
                        ids: vec![o.id.clone(), m.id.clone()],
                        detail: format!(
                            "{} updates {} ({}); both are active, so recall serves both values",
                            m.id, o.id, judged.why
                        ),
                        fix: self.command(&format!("forget {}", o.id)),
                    },
                    Relation::Compatible | Relation::BothHold => continue,
                };
                settled.insert(pair(&o.id, &m.id));
                findings.push(finding);
            }
        }
        for (kind, ids) in stale {
            findings.push(HealthFinding {
                kind: HealthKind::Stale,
                detail: format!(
                    "{} active {} {kind}",
                    ids.len(),
                    if ids.len() == 1 { "memory" } else { "memories" }
                ),
                ids,
                fix: maintain.clone(),
            });
        }

        let share = |n: u32| if active.is_empty() { 0.0 } else { n as f32 / active.len() as f32 };
        let count = |keep: &dyn Fn(&Record) -> bool| active.iter().filter(|m| keep(m)).count() as u32;
        let never_recalled = count(&|m| m.recalled() == 0);
        let recalled_unused = count(&|m| m.recalled() > 0 && m.cited == 0 && m.helpful == 0);
        let mut per_day: BTreeMap<String, u32> = BTreeMap::new();
        let mut reextractions = 0;
        for m in self.state.slots.iter().flatten() {
            *per_day.entry(date(m.created_at)).or_default() += 1;
            reextractions += m.reextracted;
        }
        let skip = per_day.len().saturating_sub(GROWTH_DAYS);
        Ok(HealthReport {
            bank: self.id.clone(),
            active: active.len() as u32,
            checked: checked as u32,
            findings,
            never_recalled,
            never_recalled_share: share(never_recalled),
            recalled_unused,
            recalled_unused_share: share(recalled_unused),
            untrusted: count(&|m| m.has_tag(TAG_UNTRUSTED)),
            redacted: count(&|m| {
                let redacted = |text: &str| text.contains(REDACTED_MARK);
                redacted(&m.content) || m.context.as_deref().is_some_and(redacted)
            }),
            reextractions,
            growth: per_day.into_iter().skip(skip).map(|(day, created)| DayCount { day, created }).collect(),
        })
    }

    /// The CLI command that does `what` on this bank (named even when it is the default one:
    /// `HINDSIGHT_BANK` may name another).
    fn command(&self, what: &str) -> String {
        format!("hindsight {what} --bank {}", self.id)
    }
}

/// A pair of ids, in one order whichever way it is met.
fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// Whether `a` came before `b` (each pair is judged once, the newer against the older).
fn older(a: &Record, b: &Record) -> bool {
    (a.created_at, &a.id) < (b.created_at, &b.id)
}
