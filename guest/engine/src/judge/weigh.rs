//! The rules' thresholds were set by hand on the development pairs, and on pairs written later
//! they were too strict: restatements in other words were kept beside their twin, updates said
//! in another order were kept both. What the rules read from a pair (how close, which values
//! match, which words are said otherwise, and the rules' own verdict) is weighed here by a
//! multinomial logistic regression fitted on labelled pairs ([`super::weights`], written by
//! `cargo run -p hindsight-dev --example judge_pairs -- --train …`). Where the weighing is unsure
//! of an update it keeps both: hiding a fact that still holds is the worst mistake.

use super::weights::WEIGHTS;
use super::{judged, Judgement, Verdict};

/// How sure the weighing must be that the new statement replaces the old one to say so.
const UPDATE_AT: f32 = 0.8;

/// The number of features, the rules' verdict and a constant included.
pub const FEATURES: usize = 27;

/// What the rules read from a pair that no marker decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evidence {
    pub cosine: f32,
    /// The share of content words the alignment keeps in place.
    pub aligned: f32,
    /// Content words both say, over the shorter statement's.
    pub shared: f32,
    pub same_values: bool,
    pub numbers_differ: bool,
    pub ids_agree: bool,
    pub same_attribute: bool,
    pub value_swapped: bool,
    pub old_has_values: bool,
    pub new_has_values: bool,
    /// A content word swapped for another in place ("staging" / "production").
    pub word_swaps: bool,
    pub cjk: bool,
    /// One side says no word the other does not, values aside.
    pub one_side_says_no_more: bool,
    pub single_word_slot: bool,
    pub edits: usize,
    pub words_said_otherwise: usize,
    pub same_subject_other_value: bool,
    pub episode: bool,
    /// One side's words are all the other's.
    pub words_contained: bool,
    pub old_values_unmatched: usize,
    pub new_values_unmatched: usize,
    pub old_words: usize,
    pub new_words: usize,
    pub value_slots: usize,
}

impl Evidence {
    /// The features the weights are fitted on: counts capped, lengths scaled, the rules' verdict
    /// one-hot, then a constant 1.
    pub fn features(&self, rules: Verdict) -> [f32; FEATURES] {
        let f = |b: bool| if b { 1.0 } else { 0.0 };
        let n = |x: usize, cap: usize| x.min(cap) as f32;
        [
            self.cosine,
            self.aligned,
            self.shared,
            f(self.same_values),
            f(self.numbers_differ),
            f(self.ids_agree),
            f(self.same_attribute),
            f(self.value_swapped),
            f(self.old_has_values),
            f(self.new_has_values),
            f(self.word_swaps),
            f(self.cjk),
            f(self.one_side_says_no_more),
            f(self.single_word_slot),
            n(self.edits, 4),
            n(self.words_said_otherwise, 6),
            f(self.same_subject_other_value),
            f(self.episode),
            f(self.words_contained),
            n(self.old_values_unmatched, 4),
            n(self.new_values_unmatched, 4),
            n(self.old_words, 15) / 5.0,
            n(self.new_words, 15) / 5.0,
            n(self.value_slots, 4),
            f(rules == Verdict::Update),
            f(rules == Verdict::Duplicate),
            1.0,
        ]
    }
}

/// How likely each verdict is (update, duplicate, both hold) for features `x` under `weights`: a
/// softmax of their products. The trainer calls it on its standardised features too.
pub fn likelihoods(x: &[f32; FEATURES], weights: &[[f32; 3]; FEATURES]) -> [f32; 3] {
    let mut z = [0f32; 3];
    for (xi, w) in x.iter().zip(weights) {
        for (zk, wk) in z.iter_mut().zip(w) {
            *zk += xi * wk;
        }
    }
    let top = z.iter().copied().fold(f32::MIN, f32::max);
    let e = z.map(|v| (v - top).exp());
    let sum: f32 = e.iter().sum();
    e.map(|v| v / sum)
}

/// The verdict once the evidence is weighed; the rules' reason stands where they agree.
pub fn weigh(evidence: &Evidence, rules: Judgement) -> Judgement {
    let p = likelihoods(&evidence.features(rules.verdict), &WEIGHTS);
    let verdict = decide(p, evidence, rules.verdict);
    if verdict == rules.verdict {
        return rules;
    }
    let reading = match verdict {
        Verdict::Update => format!("replaces it ({:.2})", p[0]),
        Verdict::Duplicate => format!("restates it ({:.2})", p[1]),
        Verdict::Compatible if rules.verdict == Verdict::Update => {
            format!("both kept, unsure it replaces it ({:.2})", p[0])
        }
        Verdict::Compatible => format!("both can hold ({:.2})", p[2]),
    };
    judged(verdict, format!("{reading}, on the weight of the evidence; the rules said: {}", rules.why))
}

/// Only what loses nothing is decided on thin evidence. An update needs 0.8. A duplicate drops
/// the new statement, so it must be the likeliest reading, and of a pair the rules took for an
/// update, or whose numbers or values differ, it is never one. An episode is replaced or merged
/// only when the rules say so: two events that sound alike are two events (a conversation's
/// exchange beside the fact it repeats). Otherwise both are kept.
fn decide(p: [f32; 3], evidence: &Evidence, rules: Verdict) -> Verdict {
    let values_differ = evidence.numbers_differ || evidence.value_swapped;
    let verdict = if p[0] >= UPDATE_AT {
        Verdict::Update
    } else if p[1] > p[0] && p[1] > p[2] && rules != Verdict::Update && !values_differ {
        Verdict::Duplicate
    } else {
        Verdict::Compatible
    };
    if evidence.episode && verdict != rules {
        Verdict::Compatible
    } else {
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::{by_rules, judge, Nature};

    #[test]
    fn a_restatement_the_rules_kept_beside_its_twin_is_weighed_a_duplicate() {
        // A pair of the tune split; 0.88 is its embeddings' cosine.
        let (old, new) =
            ("My son Leo goes to Oakwood Elementary.", "Leo, my boy, attends Oakwood Elementary School.");
        let (rules, evidence) = by_rules(old, new, 0.88, Nature::Statement);
        assert_eq!(rules.verdict, Verdict::Compatible);
        assert!(evidence.is_some());
        let weighed = judge(old, new, 0.88, Nature::Statement);
        assert_eq!(weighed.verdict, Verdict::Duplicate, "{}", weighed.why);
        assert!(weighed.why.starts_with("restates it ("), "{}", weighed.why);
        assert!(weighed.why.ends_with("the rules said: says something else"), "{}", weighed.why);
    }

    #[test]
    fn a_denial_is_left_to_the_rules_and_never_weighed_a_restatement() {
        for cosine in [0.7, 0.9, 0.99] {
            let (old, new) = ("Deploys run on Tuesdays", "Deploys never run on Tuesdays");
            let (rules, evidence) = by_rules(old, new, cosine, Nature::Statement);
            assert!(evidence.is_none());
            assert_eq!(judge(old, new, cosine, Nature::Statement), rules);
            assert_ne!(rules.verdict, Verdict::Duplicate);
        }
    }

    fn evidence() -> Evidence {
        let (_, evidence) = by_rules(
            "The user runs 5 km every morning.",
            "Every morning the user goes for a five-kilometre run.",
            0.87,
            Nature::Statement,
        );
        evidence.expect("left to the weighing")
    }

    #[test]
    fn an_update_it_is_unsure_of_keeps_both() {
        use Verdict::*;
        let e = evidence();
        assert_eq!(decide([0.85, 0.1, 0.05], &e, Compatible), Update);
        assert_eq!(decide([0.7, 0.2, 0.1], &e, Update), Compatible);
        assert_eq!(decide([0.45, 0.4, 0.15], &e, Compatible), Compatible);
        assert_eq!(decide([0.3, 0.45, 0.25], &e, Compatible), Duplicate);
        assert_eq!(decide([0.2, 0.4, 0.4], &e, Compatible), Compatible);
    }

    #[test]
    fn what_would_drop_a_new_value_is_never_weighed_a_duplicate() {
        use Verdict::*;
        let e = evidence();
        // The rules read an update: a duplicate would keep the stale value.
        assert_eq!(decide([0.3, 0.45, 0.25], &e, Update), Compatible);
        let differing = Evidence { numbers_differ: true, ..e };
        assert_eq!(decide([0.3, 0.45, 0.25], &differing, Compatible), Compatible);
        let swapped = Evidence { value_swapped: true, ..e };
        assert_eq!(decide([0.3, 0.45, 0.25], &swapped, Compatible), Compatible);
    }

    #[test]
    fn an_episode_is_replaced_or_merged_only_when_the_rules_say_so() {
        use Verdict::*;
        let episode = Evidence { episode: true, ..evidence() };
        assert_eq!(decide([0.95, 0.03, 0.02], &episode, Compatible), Compatible);
        assert_eq!(decide([0.95, 0.03, 0.02], &episode, Update), Update);
        assert_eq!(decide([0.1, 0.8, 0.1], &episode, Compatible), Compatible);
        assert_eq!(decide([0.1, 0.8, 0.1], &episode, Duplicate), Duplicate);
        assert_eq!(decide([0.1, 0.1, 0.8], &episode, Duplicate), Compatible);
        let (old, new) =
            ("Grandpa was discharged from the hospital on Tuesday.", "Grandpa left the hospital on Friday.");
        for cosine in [0.6, 0.8, 0.9, 0.99] {
            let (rules, evidence) = by_rules(old, new, cosine, Nature::Episode);
            assert!(evidence.is_some(), "left to the weighing");
            assert_eq!(rules.verdict, Compatible, "{}", rules.why);
            assert_eq!(judge(old, new, cosine, Nature::Episode).verdict, Compatible);
        }
    }
}
