//! Judging a new statement against one the bank holds, without a language model: does it
//! replace it (an update or a correction), repeat it (a duplicate), or can both hold?
//!
//! What decides, in order:
//! * words that add ("also", 也) — both hold; words that say something changed or was wrong
//!   ("now", "switched", "migrated", "actually", 改成, 不再 …) — an update, when the two are
//!   about the same thing at all (the embedding's cosine, or shared words);
//! * a new statement that only says the old one changed ("got rotated", 时间改了), naming no
//!   new value, replaces nothing: both are kept. "…, not Y" with Y the old value corrects it;
//! * values: numbers with units normalised (within 3 %: "2 years" / "24 months", °F / °C),
//!   rates ("every two weeks" is not "once a month"), identifiers, names and dates. The same
//!   statement with another number is an update when the attribute is the same (at most one
//!   word said otherwise on each side); so is one whose words, in any order, are all the
//!   other's but for a swapped number or identifier, and "X is A" / "X is B" with the same
//!   subject words and short values. "under $500" / "over $500" are two ranges. With the same
//!   values and close meaning, a duplicate;
//! * the template: statements that align word for word differ in slots. One slot holding a
//!   value that changed is an update ("password is tiger42" → "… falcon77"); a content word
//!   swapped for another is a parallel statement about another thing ("staging DB" /
//!   "production DB", "son" / "daughter") — both hold.
//!
//! What a statement is sets how much it takes ([`Nature`]): an episode (kind episodic) is
//! replaced only when the new one says the old was wrong, or plainly restates it with a change;
//! a conversation's turn (a sequence item) only when corrected. Two different days are two
//! events, and two turns that sound alike are two turns.
//!
//! Where no marker word, identity or denial decides, what the rules read ([`Evidence`]) is
//! weighed with their verdict by a logistic regression fitted on labelled pairs (`weigh`).
//! Measured with `hindsight-dev eval --pairs` on tests/data/write-pairs (docs/cli.md).

mod align;
mod lexicon;
mod text;
mod weigh;
mod weights;

use std::collections::HashSet;

use hindsight_types::Kind as MemoryKind;

use align::{align, Edit};
use text::{tokens, Kind, Token};
pub use weigh::{likelihoods, Evidence, FEATURES};

/// What kind of statement the new one is, which sets how much evidence a judgement takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nature {
    /// A fact, preference, constraint or procedure: it can change, and be said twice.
    Statement,
    /// Something that happened.
    Episode,
    /// A conversation's turn (retained as a sequence).
    Turn,
}

impl Nature {
    /// The nature of memories of `kind`.
    pub fn of(kind: MemoryKind) -> Nature {
        if kind == MemoryKind::Episodic {
            Nature::Episode
        } else {
            Nature::Statement
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The new statement replaces the old one.
    Update,
    /// It says the same thing.
    Duplicate,
    /// Both hold.
    Compatible,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// Why, in words for the outcome's reason.
    pub why: String,
}

fn judged(verdict: Verdict, why: impl Into<String>) -> Judgement {
    Judgement { verdict, why: why.into() }
}

/// The lower-cased words of `text`, space-joined and padded, for whole-word phrase matching.
fn word_line(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> =
        lower.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).collect();
    format!(" {} ", words.join(" "))
}

/// The first phrase of `latin` (whole words) or `cjk` (substrings) found in `text`.
fn marker(text: &str, latin: &[&'static str], cjk: &[&'static str]) -> Option<&'static str> {
    let line = word_line(text);
    latin
        .iter()
        .find(|p| line.contains(&format!(" {} ", p.replace('-', " "))))
        .or_else(|| cjk.iter().find(|p| text.contains(**p)))
        .copied()
}

/// Whether a word (as the tokens spell it, lower-case and stemmed or not) only says that
/// something changed.
fn changed_without_value(word: &str) -> bool {
    lexicon::CHANGED_WITHOUT_VALUE.iter().any(|w| *w == word || text::stem(w) == word)
}

fn negated(text: &str) -> bool {
    let line = word_line(text);
    lexicon::NEGATION.iter().any(|n| line.contains(&format!(" {n} ")))
        || line.split(' ').any(|w| w.ends_with("n't"))
        || text.chars().any(|c| lexicon::NEGATION_CJK.contains(&c))
}

/// A capitalised word opening a sentence is a name when the other statement has it as one.
fn unify(a: &mut [Token], b: &mut [Token]) {
    let names: HashSet<String> =
        a.iter().chain(b.iter()).filter(|t| t.kind == Kind::Name).map(|t| t.text.clone()).collect();
    for t in a.iter_mut().chain(b.iter_mut()) {
        match t.kind {
            Kind::Opening if names.contains(&t.text) => t.kind = Kind::Name,
            Kind::Opening => {
                t.text = text::stem(&t.text);
                t.kind = Kind::Word;
            }
            Kind::Word if names.contains(&t.text) => t.kind = Kind::Name,
            _ => {}
        }
    }
}

/// Whether two values are the same: equal, one number in two spellings ("34 years" / "34"),
/// or one identifier inside the other (`s3://acme-artifacts` / `acme-artifacts`).
fn same_value(x: &Token, y: &Token) -> bool {
    if x.text == y.text {
        return true;
    }
    let plain = |t: &Token| t.raw.is_none().then(|| t.text.parse::<f64>().ok()).flatten();
    if let (Some(r), Some(p)) = (x.raw, plain(y)) {
        return r == p;
    }
    if let (Some(p), Some(r)) = (plain(x), y.raw) {
        return r == p;
    }
    // One quantity in two units, converted with some rounding ("2 years" / "24 months",
    // "70 °F" / "21 °C").
    fn quantity(t: &Token) -> Option<(f64, &str)> {
        let end = t.text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (n, unit) = t.text.split_at(end);
        let unit_ok = !unit.is_empty() && unit.chars().all(|c| c.is_ascii_lowercase() || c == '%');
        n.parse::<f64>().ok().filter(|_| unit_ok).map(|n| (n, unit))
    }
    if let (Some((p, u)), Some((q, v))) = (quantity(x), quantity(y)) {
        if u == v && (p - q).abs() <= 0.03 * p.abs().max(q.abs()) {
            return true;
        }
    }
    !x.is_number()
        && !y.is_number()
        && x.text.chars().count() >= 2
        && y.text.chars().count() >= 2
        && (x.text.contains(&y.text) || y.text.contains(&x.text))
}

fn r(v: &[Token]) -> Vec<&Token> {
    v.iter().collect()
}

/// Every value of each side has its match on the other.
fn compatible(a: &[&Token], b: &[&Token]) -> bool {
    a.iter().all(|x| b.iter().any(|y| same_value(x, y)))
        && b.iter().all(|y| a.iter().any(|x| same_value(x, y)))
}

/// "…, not Tuesday" / "不是周二": the new statement names what the old one said, to deny it.
fn denies_old(old: &str, new: &str) -> Option<&'static str> {
    let lo = word_line(old);
    let lower = new.to_lowercase();
    // Only "…, not Y": a contrast, not a negated predicate ("… are not prorated").
    let latin = lower.split(", not ").skip(1).any(|rest| {
        let w = rest.split(|c: char| !(c.is_alphanumeric() || c == '\'')).next().unwrap_or("");
        !w.is_empty()
            && !lexicon::STOP.contains(&w)
            && !matches!(w, "only" | "just" | "yet" | "sure" | "needed" | "allowed")
            && (lo.contains(&format!(" {w} ")) || lo.contains(&format!(" {} ", text::stem(w))))
    });
    let cjk = new.split("不是").skip(1).any(|rest| {
        let head: String =
            rest.chars().take_while(|c| crate::text::is_cjk(*c) || c.is_alphanumeric()).take(2).collect();
        head.chars().count() == 2 && old.contains(&head)
    });
    (!negated(old) && (latin || cjk)).then_some("not")
}

/// Whether `new` only says that `old` changed (and maybe when), naming no new value:
/// "the password got reset last night", "退款流程上周有调整".
/// `b` is the new statement's content tokens, `set_a` / `set_b` both statements' content words.
fn change_without_value(
    old: &str,
    new: &str,
    b: &[Token],
    set_a: &HashSet<&str>,
    set_b: &HashSet<&str>,
) -> Option<&'static str> {
    let word = marker(new, lexicon::VALUE_FREE_CHANGE, lexicon::VALUE_FREE_CHANGE_CJK)?;
    // A change word the old statement says too is part of what both say ("to rotate the key …").
    if old.contains(word) || word_line(old).contains(&format!(" {}", text::stem(word))) {
        return None;
    }
    let said = |t: &Token| {
        let listed = |list: &[&str]| list.iter().any(|w| *w == t.text || text::stem(w) == t.text);
        set_a.contains(t.text.as_str())
            || t.is_relative_date()
            || listed(lexicon::VALUE_FREE_CHANGE)
            || changed_without_value(&t.text)
            || listed(lexicon::WHEN_WORDS)
            || (t.text.chars().count() == 1
                && lexicon::VALUE_FREE_CHANGE_CJK
                    .iter()
                    .chain(lexicon::WHEN_WORDS_CJK)
                    .any(|w| w.contains(&t.text)))
    };
    let old_says_more = set_a.iter().any(|w| !set_b.contains(w));
    (old_says_more && b.iter().all(said)).then_some(word)
}

/// "The repo's default branch is master" → ("The repo's default branch", "master"): a statement
/// of the form subject-is-value, split at its first copula.
fn copula(text: &str) -> Option<(&str, &str)> {
    let lower = text.to_lowercase();
    if let Some(at) = [" is ", " are "].iter().filter_map(|c| lower.find(c).map(|at| (at, c.len()))).min() {
        return Some((&text[..at.0], &text[at.0 + at.1..]));
    }
    let at = text.char_indices().find(|&(i, c)| {
        c == '是'
            && text[..i]
                .chars()
                .next_back()
                .is_some_and(|p| crate::text::is_cjk(p) && !"不还就也都可但只要真总".contains(p))
    })?;
    Some((&text[..at.0], &text[at.0 + '是'.len_utf8()..]))
}

/// Whether `old` and `new` say one subject is two things: the same subject (its words, in any
/// order), values that share no word. "The repo's default branch is master" / "The default
/// branch of the repo is main".
fn same_subject_other_value(old: &str, new: &str) -> bool {
    let (Some((sa, xa)), Some((sb, xb))) = (copula(old), copula(new)) else { return false };
    let content = |t: &str| -> Vec<Token> {
        let mut ts = tokens(t);
        let mut none = Vec::new();
        unify(&mut ts, &mut none);
        ts.into_iter().filter(|t| t.kind != Kind::Stop).collect()
    };
    let set = |ts: &[Token]| -> HashSet<String> { ts.iter().map(|t| t.text.clone()).collect() };
    let (sa, sb, xa, xb) = (content(sa), content(sb), content(xa), content(xb));
    // A value is a word or two ("master", "Jenna Lowe"), not a clause ("built with X").
    let short = |x: &[Token]| !x.is_empty() && x.len() <= 2;
    !sa.is_empty()
        && set(&sa) == set(&sb)
        && short(&xa)
        && short(&xb)
        && !xa.iter().any(|x| xb.iter().any(|y| same_value(x, y)))
}

/// `Caroline: Hey Mel!` → (`Caroline`, `Hey Mel!`): a transcript line's speaker and words.
fn speaker(text: &str) -> Option<(&str, &str)> {
    let (who, said) = text.split_once(':')?;
    let words: Vec<&str> = who.split_whitespace().collect();
    let named = !words.is_empty()
        && words.len() <= 3
        && words.iter().all(|w| w.chars().next().is_some_and(|c| c.is_uppercase() || crate::text::is_cjk(c)))
        && !who.chars().any(|c| c.is_ascii_digit())
        && ![
            "correction",
            "note",
            "update",
            "fyi",
            "important",
            "reminder",
            "warning",
            "todo",
            "ps",
            "edit",
            "更正",
            "注意",
        ]
        .contains(&who.trim().to_lowercase().as_str());
    (named && !said.trim().is_empty()).then(|| (who.trim(), said.trim()))
}

/// Judges `new` (of `nature`) against `old`, whose embeddings have cosine `cosine`.
pub fn judge(old: &str, new: &str, cosine: f32, nature: Nature) -> Judgement {
    match by_rules(old, new, cosine, nature) {
        (rules, Some(evidence)) => weigh::weigh(&evidence, rules),
        (rules, None) => rules,
    }
}

/// The rules' judgement, and what they read from the pair when no marker or identity decided it.
/// A conversation's turns, and a statement that negates the other, are judged by the rules alone:
/// a denial is never a restatement.
pub fn by_rules(old: &str, new: &str, cosine: f32, nature: Nature) -> (Judgement, Option<Evidence>) {
    // Two lines of a transcript are two turns: by different speakers they both hold; by the
    // same one, they are judged as turns, on their words.
    let (old, new, nature) = match (speaker(old), speaker(new)) {
        (Some((a, _)), Some((b, _))) if a != b && old != new => {
            return (judged(Verdict::Compatible, "said by another speaker"), None)
        }
        (Some((_, a)), Some((_, b))) => (a, b, Nature::Turn),
        _ => (old, new, nature),
    };
    use Verdict::*;
    let c = cosine;
    let episode = nature != Nature::Statement;
    let turn = nature == Nature::Turn;
    let (mut ta, mut tb) = (tokens(old), tokens(new));
    unify(&mut ta, &mut tb);
    let correction =
        marker(new, lexicon::CORRECTION, lexicon::CORRECTION_CJK).or_else(|| denies_old(old, new));
    // A change word the old statement says too, or one inside a command (`alembic upgrade`),
    // says no change.
    let code_free = |t: &str| t.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let change = correction.or_else(|| {
        marker(&code_free(new), lexicon::CHANGE, lexicon::CHANGE_CJK)
            .filter(|w| marker(&code_free(old), &[w], &[w]).is_none())
    });
    let additive = marker(new, lexicon::ADDITIVE, lexicon::ADDITIVE_CJK);
    let cjk = old.chars().chain(new.chars()).any(crate::text::is_cjk);

    let content =
        |ts: &[Token]| -> Vec<Token> { ts.iter().filter(|t| t.kind != Kind::Stop).cloned().collect() };
    let (a, b) = (content(&ta), content(&tb));
    let texts = |ts: &[Token]| -> Vec<String> { ts.iter().map(|t| t.text.clone()).collect() };
    let alignment = align(&texts(&a), &texts(&b));
    let ratio = alignment.ratio;

    let values = |ts: &[Token]| -> Vec<Token> { ts.iter().filter(|t| t.is_value()).cloned().collect() };
    let (va, vb) = (values(&ta), values(&tb));
    let refs = |v: &[Token], f: &dyn Fn(&Token) -> bool| -> Vec<Token> {
        v.iter().filter(|t| f(t)).cloned().collect()
    };
    let number = |t: &Token| t.is_number() && !t.is_relative_date();
    let (na, nb) = (refs(&va, &number), refs(&vb, &number));
    let (ida, idb) = (refs(&va, &|t| !number(t)), refs(&vb, &|t| !number(t)));
    // A name one side has as a value and the other inside a word ("Premium" / "Premium-plan")
    // is said by both.
    let named_by = |x: &[Token], other: &[Token]| -> Vec<Token> {
        x.iter()
            .filter(|t| {
                t.kind != Kind::Name
                    || !other.iter().any(|o| o.kind != Kind::Name && o.text.contains(&t.text))
            })
            .cloned()
            .collect()
    };
    let same_values = compatible(&r(&named_by(&va, &tb)), &r(&named_by(&vb, &ta)));
    // "under $500" / "over $500": two ranges.
    let bound = |text: &str| {
        marker(text, lexicon::UPPER_BOUND, lexicon::UPPER_BOUND_CJK)
            .map(|_| 1)
            .or_else(|| marker(text, lexicon::LOWER_BOUND, lexicon::LOWER_BOUND_CJK).map(|_| 2))
    };
    if let (Some(x), Some(y)) = (bound(old), bound(new)) {
        if x != y && same_values && change.is_none() {
            return (judged(Compatible, "the other side of a bound"), None);
        }
    }

    let set_a: HashSet<&str> = a.iter().map(|t| t.text.as_str()).collect();
    let set_b: HashSet<&str> = b.iter().map(|t| t.text.as_str()).collect();
    let shared = set_a.intersection(&set_b).count() as f32 / set_a.len().min(set_b.len()).max(1) as f32;
    let negation_differs = negated(old) != negated(new);

    // 1:1 swaps of content words (values aside) between aligned statements.
    let swaps: Vec<(Vec<&Token>, Vec<&Token>)> = alignment
        .edits
        .iter()
        .filter_map(|e| match e {
            Edit::Replace { old, new } => {
                let x: Vec<&Token> = a[old.clone()].iter().filter(|t| t.kind != Kind::Value).collect();
                let y: Vec<&Token> = b[new.clone()].iter().filter(|t| t.kind != Kind::Value).collect();
                (!x.is_empty() && x.len() == y.len() && x.len() <= 2).then_some((x, y))
            }
            _ => None,
        })
        .collect();

    // The same words (a change word in both is no change): a repeat.
    if alignment.edits.is_empty() && !a.is_empty() && !negation_differs {
        return (judged(Duplicate, "restates it (the same words)"), None);
    }
    // Numbers that differ in two places of one template name another thing ("service 2 on
    // port 8002" / "service 3 on port 8003"), not a changed value.
    let value_slots = alignment
        .edits
        .iter()
        .filter(|e| match e {
            Edit::Replace { old, new } => {
                a[old.clone()].iter().any(|t| t.kind == Kind::Value)
                    && b[new.clone()].iter().any(|t| t.kind == Kind::Value)
            }
            _ => false,
        })
        .count();
    // "… has changed" names no new value: it replaces nothing, and repeats nothing.
    if !turn && denies_old(old, new).is_none() {
        if let Some(word) = change_without_value(old, new, &b, &set_a, &set_b) {
            return (judged(Compatible, format!("says it changed (\"{word}\") but not to what")), None);
        }
    }
    if value_slots >= 2 && ratio >= 0.5 && change.is_none() {
        return (judged(Compatible, "the same statement about another numbered thing"), None);
    }
    if additive.is_some() && change.is_none() {
        return (judged(Compatible, format!("adds to it (\"{}\")", additive.unwrap_or_default())), None);
    }
    if let Some(word) = change {
        // "… is now changed": what the old statement says that the new one does not is left
        // without a successor, so both are kept.
        let says_nothing_new = b
            .iter()
            .filter(|t| !set_a.contains(t.text.as_str()))
            .all(|t| t.kind != Kind::Value && changed_without_value(&t.text));
        let old_says_more = a.iter().any(|t| !set_b.contains(t.text.as_str()));
        if !cjk && correction.is_none() && says_nothing_new && old_says_more {
            return (judged(Compatible, format!("says it changed (\"{word}\") but not to what")), None);
        }
        // An episode is replaced when it is corrected, or when the new one is plainly about the
        // same thing (a conversation's next turn that says "now" is not).
        let related = match (nature, correction) {
            (Nature::Statement, _) => c >= 0.3 || shared >= 0.3,
            (_, Some(_)) => c >= 0.5 && shared >= 0.5,
            (Nature::Episode, None) => c >= 0.7 && shared >= 0.6,
            (Nature::Turn, None) => false,
        };
        if related {
            return (judged(Update, format!("says it changed (\"{word}\")")), None);
        }
    }
    let numbers_differ = !na.is_empty()
        && !nb.is_empty()
        && !compatible(&r(&na), &r(&nb))
        && !na.iter().any(|x| compatible(&[x], &r(&nb)));
    // Identifiers one side does not name do not tell the statements apart; different ones do.
    let ids_agree = ida.is_empty() || idb.is_empty() || compatible(&r(&ida), &r(&idb));
    // The attribute must be the same: at most one word said otherwise on each side ("costs" /
    // "price"); more ("first response" / "resolution") is another attribute with its own number.
    // (Chinese words are characters, too many to count so.)
    let words_only = |x: &[Token], other: &[Token]| {
        let unsaid = |t: &&Token| {
            t.kind == Kind::Word
                && !changed_without_value(&t.text)
                && !lexicon::WHEN_WORDS.contains(&t.text.as_str())
                && !other.iter().any(|o| o.text.contains(t.text.as_str()))
        };
        x.iter().filter(unsaid).count()
    };
    let (unsaid_old, unsaid_new) = (words_only(&a, &b), words_only(&b, &a));
    let same_attribute = cjk || (unsaid_old <= 1 && unsaid_new <= 1);
    let plain = |x: &[Token], other: &[Token]| {
        x.iter()
            .filter(|t| matches!(t.kind, Kind::Word | Kind::Name))
            .filter(|t| !changed_without_value(&t.text) && !lexicon::WHEN_WORDS.contains(&t.text.as_str()))
            .filter(|t| !other.iter().any(|o| o.kind != Kind::Value && o.text == t.text))
            .count()
    };
    let unmatched_count = |x: &[Token], other: &[Token]| {
        x.iter()
            .filter(|t| {
                t.kind == Kind::Value && !t.is_relative_date() && !other.iter().any(|o| same_value(t, o))
            })
            .count()
    };
    let (plain_old, plain_new) = (plain(&a, &b), plain(&b, &a));
    let (unmatched_old, unmatched_new) = (unmatched_count(&va, &vb), unmatched_count(&vb, &va));
    let value_swapped = unmatched_old > 0 && unmatched_new > 0;
    let single_slot = |e: &Edit| matches!(e, Edit::Replace { .. });
    let single_word_slot = ratio >= 0.6
        && alignment.edits.len() == 1
        && single_slot(&alignment.edits[0])
        && match &alignment.edits[0] {
            Edit::Replace { old, new } => a[old.clone()].iter().chain(&b[new.clone()]).all(|t| !t.is_value()),
            _ => false,
        };
    let words = |ts: &[Token]| -> HashSet<String> {
        ts.iter().filter(|t| t.kind == Kind::Word).map(|t| t.text.clone()).collect()
    };
    let (ca, cb) = (words(&ta), words(&tb));
    // Turns and denials are the rules' alone, so what the weighing reads is gathered only for
    // the rest (every retained turn is judged against its neighbours).
    let weighable = !turn && !negation_differs;
    // Only a statement without a denial can say its subject is another value.
    let same_subject = weighable && same_subject_other_value(old, new);
    let evidence = weighable.then(|| Evidence {
        cosine: c,
        aligned: ratio,
        shared,
        same_values,
        numbers_differ,
        ids_agree,
        same_attribute,
        value_swapped,
        old_has_values: !va.is_empty(),
        new_has_values: !vb.is_empty(),
        word_swaps: !swaps.is_empty(),
        cjk,
        one_side_says_no_more: plain_old == 0 || plain_new == 0,
        single_word_slot,
        edits: alignment.edits.len(),
        words_said_otherwise: unsaid_old + unsaid_new,
        same_subject_other_value: same_subject,
        episode,
        words_contained: !ca.is_empty() && !cb.is_empty() && (ca.is_subset(&cb) || cb.is_subset(&ca)),
        old_values_unmatched: unmatched_old,
        new_values_unmatched: unmatched_new,
        old_words: a.len(),
        new_words: b.len(),
        value_slots,
    });
    let by_rules = 'rules: {
        if !episode && numbers_differ && ids_agree && c >= 0.75 && swaps.is_empty() && same_attribute {
            break 'rules judged(Update, "the same statement with another number");
        }
        if !episode && c >= 0.7 && same_subject {
            break 'rules judged(Update, "the same subject is now another value");
        }
        // Subject and attribute kept, the value swapped, in any word order ("The payments service
        // listens on port 8080" / "Payments service port: 9090", "X pins Node 18" / "Node 20 is
        // pinned by X"): one side says nothing the other does not but for its value. A value is a
        // number or an identifier here, not a name ("speaks French" / "speaks Spanish" may both hold).
        if !episode
            && value_swapped
            && (((plain_old == 0 || plain_new == 0) && c >= 0.6)
                || (plain_old <= 1 && plain_new <= 1 && swaps.is_empty() && c >= 0.85))
            && !negation_differs
        {
            break 'rules judged(Update, "the same subject and attribute with another value");
        }
        // Episodes (a conversation's turns) are told apart by little: one repeats another only when
        // nearly the same.
        let close = if turn { 0.95 } else { 0.8 };
        // A denial never restates; Chinese negation is read by the character (别 of 级别), so a
        // very close Chinese pair still may.
        if !va.is_empty()
            && same_values
            && c >= close
            && !single_word_slot
            && !(negation_differs && (c < 0.9 || !cjk))
        {
            break 'rules judged(Duplicate, "restates it (the same values)");
        }
        if ratio >= 0.6 {
            if alignment.edits.is_empty() {
                break 'rules if negation_differs {
                    judged(Update, "negates it")
                } else {
                    judged(Duplicate, "restates it (the same words)")
                };
            }
            if let [edit] = alignment.edits.as_slice() {
                let (x, y, end_at) = match edit {
                    Edit::Replace { old, new } => (&a[old.clone()], &b[new.clone()], old.end),
                    Edit::Delete { old } => (&a[old.clone()], &b[0..0], old.end),
                    Edit::Insert { new } => (&a[0..0], &b[new.clone()], 0),
                };
                let all_values = |ts: &[Token]| !ts.is_empty() && ts.iter().all(Token::is_value);
                let slot_same = compatible(&x.iter().collect::<Vec<_>>(), &y.iter().collect::<Vec<_>>());
                if single_slot(edit) && all_values(x) && all_values(y) && !slot_same {
                    let numbers = x.iter().all(|t| t.kind == Kind::Value);
                    let at_end = end_at + 1 >= a.len();
                    // The same dated event with another amount is a correction of it; another date
                    // is another occasion.
                    let dated = |t: &Token| ["month", "weekday", "day"].iter().any(|p| t.text.starts_with(p));
                    let same_date =
                        x.iter().chain(y).all(|t| !dated(t)) && va.iter().any(|t| dated(t) && vb.contains(t));
                    if episode && same_date && numbers && !turn {
                        break 'rules judged(Update, "the same event with another value");
                    }
                    if episode {
                        break 'rules judged(Compatible, "another occasion");
                    }
                    if numbers || at_end {
                        break 'rules judged(Update, "the same statement with another value");
                    }
                    break 'rules judged(Compatible, "the same statement about another thing");
                }
                // Words said otherwise around the same values ("capped at" / "at most") restate it;
                // one word swapped for one is another thing ("staging" / "production").
                let reworded = x.len() != y.len() && !va.is_empty();
                if (!single_slot(edit) || slot_same || reworded)
                    && same_values
                    && c >= if reworded { 0.8 } else { 0.85 }
                {
                    break 'rules if negation_differs {
                        judged(Update, "negates it")
                    } else {
                        judged(Duplicate, "restates it")
                    };
                }
                // Chinese rewords by the character: one slot swapped with the rest the same is mostly
                // a synonym (养了 / 家里有).
                if cjk && same_values && c >= if va.is_empty() { 0.7 } else { 0.85 } {
                    break 'rules judged(Duplicate, "restates it");
                }
                break 'rules judged(Compatible, "the same statement about another thing");
            }
            if same_values && swaps.is_empty() && (c >= 0.9 || (cjk && c >= 0.75)) {
                break 'rules judged(Duplicate, "restates it (reordered)");
            }
            break 'rules judged(Compatible, "differs in more than one place");
        }
        if same_values
            && !ca.is_empty()
            && !cb.is_empty()
            && (ca.is_subset(&cb) || cb.is_subset(&ca))
            && c >= 0.6
            && !turn
            && swaps.is_empty()
        {
            break 'rules judged(Duplicate, "restates it (says all it says)");
        }
        if !swaps.is_empty() && ratio >= 0.4 && (!cjk || swaps.len() >= 2) {
            break 'rules judged(Compatible, "a parallel statement about another thing");
        }
        if negation_differs && c < 0.8 {
            break 'rules judged(Compatible, "one negates what the other does not say");
        }
        // Chinese statements without values sound alike more easily.
        let close_in_meaning = if cjk && va.is_empty() && vb.is_empty() { 0.86 } else { 0.8 };
        if c >= close_in_meaning && compatible(&r(&na), &r(&nb)) && ids_agree && !turn {
            break 'rules judged(Duplicate, "restates it (close in meaning)");
        }
        let threshold = if !va.is_empty() {
            0.5
        } else if cjk {
            0.75
        } else {
            0.55
        };
        if same_values && c >= threshold && !turn {
            break 'rules judged(Duplicate, "restates it (close in meaning, the same values)");
        }
        judged(Compatible, "says something else")
    };
    (by_rules, evidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(old: &str, new: &str, cosine: f32) -> Verdict {
        judge(old, new, cosine, Nature::Statement).verdict
    }

    #[test]
    fn finding_0_2_14_a_change_without_a_value_replaces_nothing() {
        use Verdict::*;
        for (old, new) in [
            ("Customer ACME's VPN secret is PURPLE-OCTOPUS-77", "Customer ACME's VPN secret is now changed"),
            ("The staging API key is sk-test-4242", "The staging API key has been updated"),
            ("The office Wi-Fi password is tiger42.", "The office Wi-Fi password is different now."),
        ] {
            assert_eq!(verdict(old, new, 0.85), Compatible, "{new}");
        }
        // With the value it changed to, it is an update still.
        assert_eq!(
            verdict(
                "Customer ACME's VPN secret is PURPLE-OCTOPUS-77",
                "Customer ACME's VPN secret is now GREEN-EEL-12",
                0.85
            ),
            Update
        );
    }

    #[test]
    fn updates_are_caught_with_or_without_change_words() {
        use Verdict::*;
        assert_eq!(
            verdict("We use Jenkins for CI.", "We switched from Jenkins to GitHub Actions for CI.", 0.7),
            Update
        );
        assert_eq!(
            verdict("The project uses Python 3.9.", "The project has been upgraded to Python 3.12.", 0.8),
            Update
        );
        assert_eq!(
            verdict("The office Wi-Fi password is tiger42.", "The office Wi-Fi password is falcon77.", 0.89),
            Update
        );
        assert_eq!(verdict("发版日期是 5 月 8 日。", "发版日期是 5 月 15 日。", 0.99), Update);
        assert_eq!(verdict("The max upload size is 10 MB.", "The max upload size is 25 MB.", 0.96), Update);
    }

    #[test]
    fn restatements_are_duplicates() {
        use Verdict::*;
        assert_eq!(
            verdict(
                "The Redis cache TTL is 5 minutes.",
                "Cache entries in Redis expire after five minutes.",
                0.75
            ),
            Duplicate
        );
        assert_eq!(
            verdict(
                "The build server has 64 GB of RAM.",
                "The build machine is equipped with 65536 MB of memory.",
                0.86
            ),
            Duplicate
        );
        assert_eq!(
            verdict(
                "Priscilla is the tech lead for the checkout team.",
                "The checkout team's technical lead is Priscilla.",
                0.9
            ),
            Duplicate
        );
    }

    #[test]
    fn parallel_statements_both_hold() {
        use Verdict::*;
        assert_eq!(
            verdict("The staging DB listens on port 5433.", "The production DB listens on port 5432.", 0.9),
            Compatible
        );
        assert_eq!(
            verdict(
                "Static .js files are cached for 1 hour.",
                "Static .css files are cached for 1 hour.",
                0.85
            ),
            Compatible
        );
        assert_eq!(
            verdict("The CDN cache TTL for images is 1 day.", "The CDN cache TTL for video is 7 days.", 0.86),
            Compatible
        );
        assert_eq!(
            verdict("Alice owns the billing service.", "Bob owns the search service.", 0.7),
            Compatible
        );
        assert_eq!(verdict("用户的父亲住在成都。", "用户的母亲也住在成都。", 0.95), Compatible);
    }

    #[test]
    fn a_statement_repeats_itself() {
        for text in [
            "We switched from Jenkins to GitHub Actions for CI.",
            "The user now prefers Python",
            "用户现在改喝茶了，不再喝咖啡。",
            "Service 2 listens on port 8002.",
            "The team also uses Redis.",
        ] {
            assert_eq!(verdict(text, text, 1.0), Verdict::Duplicate, "{text}");
        }
    }

    #[test]
    fn a_conversation_turn_is_replaced_only_when_corrected() {
        let j = |old, new, c| judge(old, new, c, Nature::Turn).verdict;
        let old = "Caroline: I went to the support group yesterday, it was so moving.";
        assert_eq!(
            j(old, "Caroline: Now I'm thinking of going again, it was so moving.", 0.8),
            Verdict::Compatible
        );
        assert_eq!(
            j(old, "Melanie: It was so moving, I went to the support group yesterday too.", 0.9),
            Verdict::Compatible
        );
        assert_eq!(
            j(old, "Caroline: Actually I went to the support group on Monday, not yesterday.", 0.8),
            Verdict::Update
        );
        assert_eq!(j(old, old, 1.0), Verdict::Duplicate);
    }

    #[test]
    fn transcript_lines_are_turns() {
        let old = "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.";
        assert_eq!(
            verdict(
                old,
                "Melanie: I went to the LGBTQ support group yesterday and it was so powerful.",
                0.95
            ),
            Verdict::Compatible
        );
        assert_eq!(
            verdict(old, "Caroline: I love that, it was so powerful, now I want to go again.", 0.8),
            Verdict::Compatible
        );
        assert_eq!(verdict("Correction: the port is 8080", "The port is 8080", 0.9), Verdict::Duplicate);
    }

    #[test]
    fn a_quantity_in_other_units_is_a_duplicate() {
        use Verdict::*;
        assert_eq!(
            verdict(
                "The greenhouse is kept at 25 °C.",
                "The greenhouse's temperature is held at 77 °F.",
                0.82
            ),
            Duplicate
        );
        assert_eq!(verdict("The hike is 10 km long.", "The hike is 6.2 miles long.", 0.9), Duplicate);
        assert_eq!(verdict("The backup runs at 3pm.", "The backup runs at 15:00.", 0.9), Duplicate);
        // How often is a value of its own: every two weeks is not once a month.
        assert_eq!(
            verdict("Water the cactus once a month.", "Water the cactus every two weeks.", 0.9),
            Update
        );
    }

    #[test]
    fn a_change_without_a_value_never_supersedes() {
        use Verdict::*;
        for (old, new) in [
            ("The staging DB password is hunter-22.", "The staging DB password got rotated last week."),
            ("Lunch with Dana is Thursday at noon.", "Lunch with Dana got rescheduled."),
            ("周会在周三下午 3 点。", "周会时间改了。"),
        ] {
            assert_eq!(verdict(old, new, 0.8), Compatible, "{new}");
        }
    }

    #[test]
    fn the_same_subject_and_attribute_with_another_value_supersedes() {
        use Verdict::*;
        assert_eq!(
            verdict("The search service listens on port 9200.", "Search service port: 9300.", 0.75),
            Update
        );
        assert_eq!(
            verdict("The project pins Go 1.21 in go.mod.", "go.mod pins Go 1.22 for the project.", 0.88),
            Update
        );
        // One subject, said in another word order, is now another thing.
        assert_eq!(
            verdict(
                "The repo's default branch is develop.",
                "The default branch of the repo is trunk.",
                0.83
            ),
            Update
        );
        // Another attribute with its own number both hold.
        assert_eq!(
            verdict(
                "The SLA for Gold first response is 2 hours.",
                "The SLA for Gold resolution is 12 hours.",
                0.81
            ),
            Compatible
        );
        // Two sides of a bound both hold.
        assert_eq!(
            verdict("Orders under $50 ship by post.", "Orders over $50 ship by courier.", 0.85),
            Compatible
        );
        // "…, not Y" denies what the old one said.
        assert_eq!(
            judge(
                "Priya closed ticket #77 on Monday.",
                "It was Sam, not Priya, who closed ticket #77 on Monday.",
                0.85,
                Nature::Episode
            )
            .verdict,
            Update
        );
    }

    #[test]
    fn another_day_is_another_episode_unless_it_corrects() {
        let j = |old, new| judge(old, new, 0.85, Nature::Episode).verdict;
        assert_eq!(j("On Tuesday the deploy failed.", "On Thursday the deploy failed."), Verdict::Compatible);
        assert_eq!(
            j(
                "The user met the landlord on Tuesday.",
                "Correction: the user met the landlord on Thursday, not Tuesday."
            ),
            Verdict::Update
        );
    }
}
