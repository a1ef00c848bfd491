//! The entities a memory names, as keyword terms: what co-mention expansion follows from a
//! recall's top hits to the other memories that name the same thing ("Sweden", "Pride",
//! "Charlotte's Web", a CJK term), when those share no word with the question itself.

use std::collections::HashSet;

use crate::lexical;
use crate::text::is_cjk;

/// Capitalised words that open no sentence yet name nothing particular.
const NOT_NAMES: [&str; 16] = [
    "I",
    "I'm",
    "I've",
    "I'll",
    "I'd",
    "Im",
    "OK",
    "Ok",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Mr",
];

/// Abbreviated titles, whose full stop ends no sentence.
const TITLES: [&str; 5] = ["Mr", "Mrs", "Ms", "Dr", "St"];

/// The keyword terms (as [`lexical::tokenize`] makes them) of the entities `content` names: its
/// proper nouns (a capitalised word that does not open a sentence, possessive cut), and for CJK
/// text, which has no capitals, its terms of two characters. Each term once, in order.
pub fn terms(content: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut push = |term: &str| {
        if seen.insert(term.to_string()) {
            out.push(term.to_string());
        }
    };
    let mut opens_sentence = true;
    for raw in content.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let word = word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")).unwrap_or(word);
        let proper = !opens_sentence
            && word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().count() > 1
            && !NOT_NAMES.contains(&word);
        if proper {
            lexical::for_each_term(word, &mut push);
        }
        if word.chars().any(is_cjk) {
            lexical::for_each_term(word, |t| {
                if t.chars().count() == 2 && t.chars().all(is_cjk) {
                    push(t)
                }
            });
        }
        // A word ending a sentence, a `Name:` prefix or an "[image:" caption's opening makes the
        // next one open a sentence ("Mr." does not); a dash between words changes nothing.
        if !word.is_empty() {
            opens_sentence = raw.ends_with(['.', '!', '?', ':', ';']) && !TITLES.contains(&word);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proper_nouns_inside_a_sentence_are_entities_and_sentence_openers_are_not() {
        let t =
            terms("Caroline: I moved from Sweden four years ago. Yesterday I read Charlotte's Web with Mel!");
        assert_eq!(t, vec!["sweden", "charlott", "web", "mel"]);
        assert!(terms("Melanie: Wow! That is great. I'm proud of you on Friday.").is_empty());
        assert_eq!(terms("I met Mr. Smith \u{2014} Oslo was cold"), vec!["smith", "oslo"]);
    }

    #[test]
    fn cjk_text_gives_its_two_character_terms() {
        assert_eq!(terms("我在北京工作"), vec!["我在", "在北", "北京", "京工", "工作"]);
    }
}
