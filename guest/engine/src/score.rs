//! The fused recall score and its per-factor breakdown.

use hindsight_types::settings::RecallSettings;
use hindsight_types::time::{Timestamp, DAY_MS};
pub use hindsight_types::Score;

use crate::record::{Class, Record};

/// What a candidate brings to fusion before normalisation.
#[derive(Debug, Clone, Copy)]
pub struct Evidence {
    pub similarity: f32,
    pub bm25: f32,
    /// How much the memory's relevance (semantic and lexical) counts, 0..1: below 1 for a turn
    /// spoken by someone other than the people a list question names, for a memory that is
    /// itself a question, and for a conversation turn about its addressee (the factors multiply).
    pub prior: f32,
}

impl Evidence {
    pub fn new(similarity: f32, bm25: f32) -> Evidence {
        Evidence { similarity, bm25, prior: 1.0 }
    }
}

/// Normalisation bounds over one query's candidates.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    sim_min: f32,
    sim_max: f32,
    bm25_max: f32,
}

impl Bounds {
    pub fn over(evidence: impl Iterator<Item = Evidence>) -> Bounds {
        let mut b = Bounds { sim_min: f32::INFINITY, sim_max: f32::NEG_INFINITY, bm25_max: 0.0 };
        for e in evidence {
            b.sim_min = b.sim_min.min(e.similarity);
            b.sim_max = b.sim_max.max(e.similarity);
            b.bm25_max = b.bm25_max.max(e.bm25);
        }
        b
    }

    fn semantic(&self, similarity: f32) -> f32 {
        let span = self.sim_max - self.sim_min;
        if span > 1e-6 {
            // Clamped: a memory found by co-mention, not by the search, may lie below the pool.
            ((similarity - self.sim_min) / span).max(0.0)
        } else {
            // One candidate, or all alike: fall back to the absolute similarity.
            similarity.max(0.0)
        }
    }

    fn lexical(&self, bm25: f32) -> f32 {
        if self.bm25_max > 0.0 {
            bm25 / self.bm25_max
        } else {
            0.0
        }
    }
}

/// The memory's recency half-life in days; none for a constraint, which holds until replaced.
/// By class (preference, transient) or else kind, lengthened by each reinforcement.
pub fn half_life_days(memory: &Record, settings: &RecallSettings) -> Option<f32> {
    let base = match memory.class() {
        Class::Constraint => return None,
        Class::Preference => settings.half_life_days_preference,
        Class::Transient => settings.half_life_days_transient,
        Class::Plain => settings.half_life_days(memory.kind),
    };
    let stretch = (1.0 + settings.reinforcement_half_life_step * memory.reinforcements as f32)
        .min(settings.max_half_life_multiplier.max(1.0));
    Some(base * stretch)
}

/// exp(-ln2 · age / half-life): 1 for a memory from now, ½ one half-life ago.
pub fn recency(memory: &Record, now: Timestamp, settings: &RecallSettings) -> f32 {
    let Some(half_life) = half_life_days(memory, settings) else { return 1.0 };
    let age_days = (now - memory.occurred_at).max(0) as f32 / DAY_MS as f32;
    (-std::f32::consts::LN_2 * age_days / half_life).exp()
}

pub fn fuse(
    memory: &Record,
    evidence: Evidence,
    bounds: &Bounds,
    now: Timestamp,
    task_type: Option<&str>,
    settings: &RecallSettings,
) -> Score {
    let w = &settings.weights;
    let task_match = match (task_type, &memory.task_type) {
        (Some(q), Some(m)) if q.eq_ignore_ascii_case(m) => 1.0,
        _ => 0.0,
    };
    let mut s = Score {
        semantic: w.semantic * evidence.prior * bounds.semantic(evidence.similarity),
        lexical: w.lexical * evidence.prior * bounds.lexical(evidence.bm25),
        recency: w.recency * recency(memory, now, settings),
        confidence: w.confidence * memory.confidence,
        importance: w.importance * memory.importance,
        task_match: w.task_match * task_match,
        source: w.source * settings.source_weight(memory.source),
        total: 0.0,
        similarity: evidence.similarity,
    };
    s.total = s.semantic + s.lexical + s.recency + s.confidence + s.importance + s.task_match + s.source;
    s
}

#[cfg(test)]
mod tests {
    use hindsight_types::settings::Settings;
    use hindsight_types::Memory;

    use super::*;

    fn memory(occurred_at: i64) -> Record {
        let item = Memory::new("x").occurred_at(occurred_at);
        crate::record::build(item, "m".into(), occurred_at, &Settings::default(), "model").unwrap()
    }

    #[test]
    fn recency_halves_each_half_life() {
        let settings = RecallSettings::default();
        let m = memory(0);
        let half = (settings.half_life_days_episodic * DAY_MS as f32) as i64;
        assert!((recency(&m, 0, &settings) - 1.0).abs() < 1e-6);
        assert!((recency(&m, half, &settings) - 0.5).abs() < 1e-4);
        assert!((recency(&m, 2 * half, &settings) - 0.25).abs() < 1e-4);
    }

    #[test]
    fn total_is_the_sum_of_weighted_factors() {
        let settings = RecallSettings::default();
        let m = memory(0);
        let e = [Evidence::new(0.2, 0.0), Evidence::new(0.8, 3.0)];
        let bounds = Bounds::over(e.iter().copied());
        let best = fuse(&m, e[1], &bounds, 0, None, &settings);
        let worst = fuse(&m, e[0], &bounds, 0, None, &settings);
        assert!((best.semantic - settings.weights.semantic).abs() < 1e-6);
        assert!((best.lexical - settings.weights.lexical).abs() < 1e-6);
        assert_eq!(worst.semantic, 0.0);
        let sum = best.semantic
            + best.lexical
            + best.recency
            + best.confidence
            + best.importance
            + best.task_match
            + best.source;
        assert!((best.total - sum).abs() < 1e-6);
        assert!(best.total > worst.total);
    }

    #[test]
    fn constraints_never_decay_and_reinforcement_slows_decay() {
        let settings = RecallSettings::default();
        let year = 365 * DAY_MS;
        let mut constraint = memory(0);
        constraint.tags.push("constraint".into());
        assert_eq!(recency(&constraint, year, &settings), 1.0);
        let plain = memory(0);
        let mut reinforced = memory(0);
        reinforced.reinforcements = 4;
        assert!(recency(&reinforced, 60 * DAY_MS, &settings) > recency(&plain, 60 * DAY_MS, &settings));
        let mut transient = memory(0);
        transient.tags.push("transient".into());
        assert!(recency(&transient, 14 * DAY_MS, &settings) < 0.26);
    }

    #[test]
    fn the_users_word_outweighs_the_agents_inference() {
        let settings = RecallSettings::default();
        let mut user = memory(0);
        user.source = hindsight_types::Source::UserExplicit;
        let agent = memory(0);
        let e = Evidence::new(0.5, 1.0);
        let bounds = Bounds::over([e].into_iter());
        assert!(
            fuse(&user, e, &bounds, 0, None, &settings).total
                > fuse(&agent, e, &bounds, 0, None, &settings).total
        );
    }
}
