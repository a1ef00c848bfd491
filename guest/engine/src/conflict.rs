//! Whether a new statement contradicts an old one: a negation where the other has none, a
//! changed value ("Java" → "Python", "30 s" → "60 s"), or an explicit change word ("now",
//! "instead", 改成). Text rules only; the bank decides closeness with the embedding too.

use std::collections::HashSet;

use crate::filter::has_phrase;
use crate::lexical::tokenize;
use crate::text::{is_cjk, words};

const CHANGE: &[&str] = &[
    "now",
    "instead",
    "no longer",
    "after all",
    "anymore",
    "any more",
    "switched",
    "switch to",
    "switching to",
    "changed",
    "change to",
    "from now on",
    "rather than",
    "replaced",
    "moved to",
    "these days",
    "nowadays",
];
const CHANGE_CJK: &[&str] =
    &["改成", "换成", "不再", "现在", "改为", "改用", "换用", "以后", "从今以后", "如今"];

const NEGATION: &[&str] = &[
    "not",
    "never",
    "no",
    "don't",
    "doesn't",
    "didn't",
    "isn't",
    "aren't",
    "wasn't",
    "shouldn't",
    "can't",
    "cannot",
    "won't",
    "mustn't",
    "without",
    "avoid",
    "stop",
    "stopped",
];
const NEGATION_CJK: &[char] = &['不', '没', '别', '勿', '非'];

/// What the conflict rules see of a text.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// Its keywords once values and change words are set aside: what it is about.
    frame: HashSet<String>,
    /// Names, numbers and identifiers, lower-cased: what it asserts.
    values: HashSet<String>,
    negated: bool,
    announces_change: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    Negation,
    ChangedValue,
    ChangeWord,
}

impl Difference {
    pub fn describe(self) -> &'static str {
        match self {
            Difference::Negation => "negates it",
            Difference::ChangedValue => "changes a value in it",
            Difference::ChangeWord => "says it changed",
        }
    }
}

/// Names, numbers and identifiers as written: a word with a digit, a capital after its first
/// letter (MySQL), or a capitalised word that does not start a sentence (Java); Latin words
/// inside CJK text count too, since those are names there.
fn value_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut sentence_start = true;
    let has_cjk = text.chars().any(is_cjk);
    for raw in text.split(|c: char| {
        c.is_whitespace() || is_cjk(c) || matches!(c, ',' | ';' | ':' | '(' | ')' | '"' | '，' | '。')
    }) {
        let word = raw.trim_matches(|c: char| !(c.is_alphanumeric()));
        let ends_sentence = raw.ends_with(['.', '!', '?']);
        if !word.is_empty() {
            let mut chars = word.chars();
            let first = chars.next().unwrap_or(' ');
            let inner_capital = chars.any(|c| c.is_uppercase());
            let digit = word.chars().any(|c| c.is_ascii_digit());
            let capitalised = first.is_uppercase() && !sentence_start && word != "I";
            let latin_in_cjk = has_cjk && word.is_ascii();
            if digit || inner_capital || capitalised || latin_in_cjk {
                out.push(word.to_lowercase());
            }
            sentence_start = false;
        }
        if ends_sentence {
            sentence_start = true;
        }
    }
    out
}

impl Statement {
    pub fn of(text: &str) -> Statement {
        let words = words(text);
        let lower = text.to_lowercase();
        let values: HashSet<String> = value_words(text).into_iter().collect();
        let announces_change =
            CHANGE.iter().any(|p| has_phrase(&words, p)) || CHANGE_CJK.iter().any(|p| lower.contains(p));
        let negated = NEGATION.iter().any(|p| has_phrase(&words, p))
            || words.iter().any(|w| w.ends_with("n't"))
            || lower.chars().any(|c| NEGATION_CJK.contains(&c));
        // The frame leaves out values, change and negation words, so "user prefers Java" and
        // "user now prefers Python" are about the same thing.
        let mut stripped: String =
            lower.chars().map(|c| if c.is_alphanumeric() || c == '\'' { c } else { ' ' }).collect();
        stripped = format!(" {stripped} ");
        for p in CHANGE {
            let padded = format!(" {p} ");
            while stripped.contains(&padded) {
                stripped = stripped.replace(&padded, " ");
            }
        }
        for p in CHANGE_CJK {
            stripped = stripped.replace(p, " ");
        }
        stripped.retain(|c| !NEGATION_CJK.contains(&c));
        // Values as the tokenizer spells them too ("Jenkins" → "jenkin").
        let value_terms: HashSet<String> =
            values.iter().flat_map(|v| tokenize(v)).chain(values.iter().cloned()).collect();
        let frame = tokenize(&stripped)
            .into_iter()
            .filter(|t| !value_terms.contains(t))
            .filter(|t| !NEGATION.contains(&t.as_str()))
            .filter(|t| !t.chars().any(|c| c.is_ascii_digit()))
            .collect();
        Statement { frame, values, negated, announces_change }
    }

    /// Jaccard overlap of the two frames; 0 when either is empty.
    pub fn frame_overlap(&self, other: &Statement) -> f32 {
        if self.frame.is_empty() || other.frame.is_empty() {
            return 0.0;
        }
        let shared = self.frame.intersection(&other.frame).count();
        shared as f32 / (self.frame.len() + other.frame.len() - shared) as f32
    }

    /// How `self` (new) contradicts `old`, given how close the two are. Close in meaning
    /// (`near`): a negation mismatch, a change word, or exactly one value swapped for another
    /// ("30 s" → "60 s"; two swapped values are more likely another entity: "service 1 on
    /// port 8001" vs "service 2 on port 8002"). Only the same frame: a changed value must be
    /// announced by a change word, or be a negation, since two statements of one shape
    /// ("likes Java", "likes Python") can both hold.
    pub fn contradicts(&self, old: &Statement, near: bool, same_frame: bool) -> Option<Difference> {
        if !(near || same_frame) {
            return None;
        }
        let added = self.values.difference(&old.values).count();
        let removed = old.values.difference(&self.values).count();
        let values_changed = added > 0 && removed > 0;
        if self.negated != old.negated {
            Some(Difference::Negation)
        } else if self.announces_change && (near || values_changed) {
            Some(Difference::ChangeWord)
        } else if near && added == 1 && removed == 1 {
            Some(Difference::ChangedValue)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(new: &str, old: &str, near: bool) -> Option<Difference> {
        let (n, o) = (Statement::of(new), Statement::of(old));
        let same_frame = n.frame_overlap(&o) >= 0.6;
        n.contradicts(&o, near, same_frame)
    }

    #[test]
    fn value_words_are_names_numbers_and_identifiers() {
        assert_eq!(value_words("The user prefers Java."), vec!["java"]);
        assert_eq!(value_words("Use MySQL after all"), vec!["mysql"]);
        assert_eq!(value_words("Timeout is 30 seconds"), vec!["30"]);
        assert_eq!(value_words("用户喜欢Java"), vec!["java"]);
        assert!(value_words("I think the build is slow").is_empty());
    }

    #[test]
    fn a_changed_preference_with_a_change_word_contradicts_by_frame_alone() {
        assert_eq!(
            verdict("user now prefers Python", "user prefers Java", false),
            Some(Difference::ChangeWord)
        );
        assert_eq!(
            verdict("Use MySQL for the database after all", "Use PostgreSQL for the database", false),
            Some(Difference::ChangeWord)
        );
        assert_eq!(verdict("用户现在改成喜欢Python", "用户喜欢Java", false), Some(Difference::ChangeWord));
        assert_eq!(
            verdict(
                "The team now deploys with GitHub Actions instead",
                "The team deploys with Jenkins",
                false
            ),
            Some(Difference::ChangeWord)
        );
    }

    #[test]
    fn two_statements_of_one_shape_can_both_hold() {
        assert_eq!(verdict("user likes Python", "user likes Java", false), None);
        assert_eq!(verdict("The user prefers Java for backend work", "The user prefers Java", false), None);
    }

    #[test]
    fn near_statements_contradict_by_negation_or_value() {
        assert_eq!(
            verdict("CSV export should not use utf-8-sig", "CSV export must use utf-8-sig", true),
            Some(Difference::Negation)
        );
        assert_eq!(
            verdict("API timeout should be 60 seconds", "API timeout should be 30 seconds", true),
            Some(Difference::ChangedValue)
        );
        assert_eq!(
            verdict(
                "The user likes dark mode in the editor",
                "The user prefers dark mode in the editor",
                true
            ),
            None
        );
        assert_eq!(verdict("service 2 listens on port 8002", "service 1 listens on port 8001", true), None);
    }

    #[test]
    fn unrelated_statements_never_contradict() {
        assert_eq!(verdict("Deploy on Fridays is now fine", "CSV export must use utf-8-sig", false), None);
    }
}
