//! The write filter's rules: what a statement is (a constraint, a preference, a correction, a
//! decision, filler) from its words alone, in English and Chinese. No model is involved, so
//! the rules hold when the host has no LLM.

use crate::text::words;

/// What the rules say about one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Kept whatever an importance score says; the reason names the rule.
    Keep(KeepReason),
    /// Pure acknowledgement or filler: dropped.
    Filler,
    /// No rule applies: kept, unless an LLM scores it below the threshold.
    Neutral,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepReason {
    Constraint,
    Preference,
    Correction,
    Decision,
}

impl KeepReason {
    pub fn describe(self) -> &'static str {
        match self {
            KeepReason::Constraint => "an explicit constraint",
            KeepReason::Preference => "a stated preference",
            KeepReason::Correction => "a correction",
            KeepReason::Decision => "a decision",
        }
    }
}

const CONSTRAINT: &[&str] = &[
    "must",
    "must not",
    "mustn't",
    "never",
    "don't",
    "do not",
    "always",
    "only use",
    "required",
    "requires",
    "have to",
    "has to",
    "not allowed",
    "forbidden",
    "make sure",
    "need to",
];
const CONSTRAINT_CJK: &[&str] = &["必须", "不要", "只能", "禁止", "一定要", "务必", "不能", "不许"];

const PREFERENCE: &[&str] = &[
    "prefer",
    "prefers",
    "preferred",
    "preference",
    "would rather",
    "likes",
    "like to",
    "love",
    "loves",
    "favorite",
    "favourite",
    "hate",
    "hates",
    "dislike",
    "dislikes",
];
const PREFERENCE_CJK: &[&str] = &["喜欢", "偏好", "更喜欢", "讨厌", "想要", "习惯"];

const CORRECTION: &[&str] = &[
    "actually",
    "that's wrong",
    "that is wrong",
    "not correct",
    "incorrect",
    "instead",
    "should be",
    "should have",
    "wrong",
    "mistake",
    "no longer",
    "not anymore",
];
const CORRECTION_CJK: &[&str] = &["不对", "错了", "应该是", "改成", "换成", "不再", "其实"];

const DECISION: &[&str] = &[
    "decided",
    "decide",
    "decision",
    "we will use",
    "we'll use",
    "going with",
    "go with",
    "chose",
    "chosen",
    "agreed",
    "settled on",
];
const DECISION_CJK: &[&str] = &["决定", "选定", "定了", "确定用"];

/// Whole utterances that carry nothing to remember.
const FILLER_PHRASES: &[&str] = &[
    "let me think",
    "let me see",
    "one moment",
    "give me a second",
    "sounds good",
    "got it",
    "thank you",
    "thank you very much",
    "no problem",
    "go on",
    "go ahead",
    "keep going",
    "carry on",
    "i see",
    "makes sense",
    "all right",
    "alright",
    "okay then",
    "ok then",
];
/// Words that, alone or together, are filler ("ok thanks", "yes sure").
const FILLER_WORDS: &[&str] = &[
    "ok", "okay", "k", "thanks", "thx", "ty", "sure", "yes", "yeah", "yep", "no", "nope", "fine", "great",
    "cool", "nice", "good", "hmm", "hm", "um", "uh", "ah", "oh", "right", "alright", "done", "continue",
    "next", "perfect", "awesome", "lol", "please", "and", "so", "well",
];
const FILLER_CJK: &[&str] = &[
    "好的",
    "好",
    "嗯",
    "嗯嗯",
    "继续",
    "谢谢",
    "行",
    "可以",
    "收到",
    "明白",
    "知道了",
    "对",
    "是的",
    "好吧",
    "没问题",
    "哦",
    "啊",
    "让我想想",
    "稍等",
];

/// Whether `phrase` (one or more words) occurs as whole words in `words`.
pub(crate) fn has_phrase(words: &[String], phrase: &str) -> bool {
    let needle: Vec<&str> = phrase.split(' ').collect();
    words.windows(needle.len()).any(|w| w.iter().zip(&needle).all(|(a, b)| a == b))
}

fn matches_any(words: &[String], text: &str, english: &[&str], cjk: &[&str]) -> bool {
    english.iter().any(|p| has_phrase(words, p)) || cjk.iter().any(|p| text.contains(p))
}

/// The lower-cased words of a text, punctuation and emoji turned into single spaces.
fn bare(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

pub fn is_filler(text: &str) -> bool {
    let bare = bare(text);
    if bare.is_empty() {
        // Only punctuation or emoji.
        return true;
    }
    if FILLER_PHRASES.contains(&bare.as_str()) || FILLER_CJK.contains(&bare.as_str()) {
        return true;
    }
    let ws: Vec<String> = bare.split(' ').map(String::from).collect();
    // "ok thanks", "好的 谢谢": every piece is filler on its own.
    ws.iter().all(|w| FILLER_WORDS.contains(&w.as_str()) || FILLER_CJK.contains(&w.as_str()))
        || FILLER_PHRASES.iter().any(|p| {
            let rest: Vec<&String> = ws.iter().filter(|w| !p.split(' ').any(|pw| pw == *w)).collect();
            has_phrase(&ws, p) && rest.iter().all(|w| FILLER_WORDS.contains(&w.as_str()))
        })
}

pub fn classify(text: &str) -> Verdict {
    let ws = words(text);
    let lower = text.to_lowercase();
    if matches_any(&ws, &lower, CONSTRAINT, CONSTRAINT_CJK) {
        Verdict::Keep(KeepReason::Constraint)
    } else if matches_any(&ws, &lower, CORRECTION, CORRECTION_CJK) {
        Verdict::Keep(KeepReason::Correction)
    } else if matches_any(&ws, &lower, DECISION, DECISION_CJK) {
        Verdict::Keep(KeepReason::Decision)
    } else if matches_any(&ws, &lower, PREFERENCE, PREFERENCE_CJK) {
        Verdict::Keep(KeepReason::Preference)
    } else if is_filler(text) {
        Verdict::Filler
    } else {
        Verdict::Neutral
    }
}

/// The same text up to case, spacing and punctuation: what counts as an exact repeat.
pub fn repeat_key(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// The user asked for this to be remembered ("remember this", 记住).
pub fn asks_to_remember(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "remember this",
        "remember that",
        "please remember",
        "don't forget",
        "keep in mind",
        "记住",
        "记下来",
        "别忘了",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

/// Whether an error message describes a failure that may pass (timeouts, rate limits, network,
/// overload) rather than one that will recur (a removed API, a wrong approach).
pub fn is_transient_failure(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "timeout",
        "timed out",
        "time out",
        "rate limit",
        "rate-limit",
        "too many requests",
        "429",
        "502",
        "503",
        "504",
        "temporarily",
        "try again",
        "network",
        "connection reset",
        "connection refused",
        "econnreset",
        "unreachable",
        "service unavailable",
        "overloaded",
        "超时",
        "限流",
        "网络",
    ]
    .iter()
    .any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraints_preferences_corrections_and_decisions_are_kept() {
        for (text, reason) in [
            ("Never push to main without review", KeepReason::Constraint),
            ("You must only use the v2 API", KeepReason::Constraint),
            ("Don't call the payments API on weekends", KeepReason::Constraint),
            ("导出CSV必须用utf-8-sig编码", KeepReason::Constraint),
            ("不要在周五部署", KeepReason::Constraint),
            ("只能用内网的镜像", KeepReason::Constraint),
            ("The user prefers Python for scripts", KeepReason::Preference),
            ("用户喜欢简洁的回答", KeepReason::Preference),
            ("Actually the port is 8443, not 8080", KeepReason::Correction),
            ("We decided to go with SQLite", KeepReason::Decision),
        ] {
            assert_eq!(classify(text), Verdict::Keep(reason), "{text}");
        }
    }

    #[test]
    fn acknowledgements_and_filler_are_dropped() {
        for text in [
            "ok",
            "OK!",
            "thanks",
            "Ok, thanks.",
            "let me think",
            "Let me think...",
            "好的",
            "嗯",
            "继续",
            "好的，谢谢",
            "👍",
        ] {
            assert_eq!(classify(text), Verdict::Filler, "{text}");
        }
    }

    #[test]
    fn plain_statements_are_neutral() {
        for text in
            ["The build uses cargo-nextest", "ok so the staging server is at 10.0.0.5", "周三开会讨论预算"]
        {
            assert_eq!(classify(text), Verdict::Neutral, "{text}");
        }
    }

    #[test]
    fn repeats_ignore_case_spacing_and_punctuation() {
        assert_eq!(repeat_key("Use  UTF-8!"), repeat_key("use utf8"));
        assert_ne!(repeat_key("use utf-8"), repeat_key("use utf-16"));
    }

    #[test]
    fn remember_requests_are_seen_in_user_messages() {
        assert!(asks_to_remember("Please remember this: invoices go to finance@"));
        assert!(asks_to_remember("记住，以后都用UTF-8"));
        assert!(!asks_to_remember("what do you remember about it?"));
    }

    #[test]
    fn transient_failures_are_told_from_permanent_ones() {
        assert!(is_transient_failure("HTTP 429 Too Many Requests"));
        assert!(is_transient_failure("read timed out after 30s"));
        assert!(!is_transient_failure("404: the /v1/reports endpoint was removed"));
    }
}
