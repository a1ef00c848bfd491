//! What a recall's question asks for, read by rule (no LLM at query time): the people it names
//! and whether it gathers a list ("what has John done?") rather than looks up one fact; and
//! whether a memory is itself a question, which answers nothing.

/// The speaker of a memory: its `speaker` metadata, else the `Name:` prefix of a conversation
/// turn ("Caroline: I went to…"), else none.
pub fn speaker<'a>(content: &'a str, metadata: &'a [(String, String)]) -> Option<&'a str> {
    if let Some((_, name)) = metadata.iter().find(|(k, _)| k == "speaker") {
        return Some(name.as_str()).filter(|n| !n.trim().is_empty());
    }
    let (prefix, _) = content.split_once(": ")?;
    let looks_like_a_name = prefix.len() <= 40
        && !prefix.is_empty()
        && prefix.split(' ').count() <= 3
        && prefix.split(' ').all(|w| {
            let mut chars = w.chars();
            chars.next().is_some_and(char::is_uppercase)
                && chars.all(|c| c.is_alphanumeric() || matches!(c, '-' | '\'' | '.'))
        });
    looks_like_a_name.then_some(prefix)
}

/// The capitalised words of a question, possessives cut ("Melanie's" → "Melanie"): the words that
/// may name a person.
fn capitalised_words(question: &str) -> impl Iterator<Item = &str> {
    question
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-'))
        .map(|w| w.strip_suffix("'s").or_else(|| w.strip_suffix("’s")).unwrap_or(w))
        .map(|w| w.trim_matches(|c: char| c == '\'' || c == '’' || c == '-'))
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
}

/// Whether the question names `speaker`: its full name, or its first name alone.
pub fn names(question: &str, speaker: &str) -> bool {
    let first = speaker.split(' ').next().unwrap_or(speaker);
    if speaker.contains(' ') && question.to_lowercase().contains(&speaker.to_lowercase()) {
        return true;
    }
    capitalised_words(question).any(|w| w.eq_ignore_ascii_case(first))
}

/// The words of a lowercased question, punctuation dropped.
fn words(q: &str) -> impl Iterator<Item = &str> {
    q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty())
}

/// The question with the speakers it names replaced by "they" ("their" for a possessive), or
/// none when it names none of `speakers`. Embedded with the name, a question leans towards every
/// turn that says the name (the other speaker's "Hey Mel!") rather than towards what it asks;
/// which person it is about is the speaker prior's business.
pub fn without_speakers<'s>(question: &str, speakers: impl IntoIterator<Item = &'s str>) -> Option<String> {
    let mut named: Vec<&str> = Vec::new();
    for speaker in speakers.into_iter().filter(|s| names(question, s)) {
        named.push(speaker);
        named.extend(speaker.split(' ').next().filter(|first| *first != speaker));
    }
    if named.is_empty() {
        return None;
    }
    // Full names before first names, so "John Smith" goes whole.
    named.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut out = String::with_capacity(question.len());
    let mut rest = question;
    'scan: while !rest.is_empty() {
        let at_word_start = out.chars().last().is_none_or(|c| !c.is_alphanumeric());
        if at_word_start {
            for name in &named {
                let Some(after) = rest.strip_prefix(name) else { continue };
                let (replacement, after) = match after.strip_prefix("'s").or_else(|| after.strip_prefix("’s"))
                {
                    Some(tail) => ("their", tail),
                    None => ("they", after),
                };
                if after.chars().next().is_none_or(|c| !c.is_alphanumeric()) {
                    out.push_str(replacement);
                    rest = after;
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().expect("rest is not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// Whether the question gathers a list across memories ("What activities has Melanie done?",
/// "What do they have in common?", "all the books…") rather than asks for one fact.
pub fn gathers(question: &str) -> bool {
    let q = question.to_lowercase();
    const CUES: [&str; 14] = [
        " all ",
        " both ",
        "in common",
        "kinds of",
        "types of",
        "activities",
        "hobbies",
        "ways ",
        "events",
        "things",
        "places",
        "how many",
        "has ",
        "have ",
    ];
    let asks_what = matches!(words(&q).next(), Some("what" | "which" | "where" | "who" | "how"));
    let padded = format!(" {q} ");
    asks_what && CUES.iter().any(|cue| padded.contains(cue))
}

/// Whether the question asks what a person would do or be ("Would Caroline pursue writing?",
/// "What might John's degree be in?"): answered from what they said of themselves.
pub fn speculates(question: &str) -> bool {
    words(&question.to_lowercase()).any(|w| matches!(w, "would" | "might" | "likely" | "could" | "probably"))
}

/// What a turn's speaker said: its text without the speaker's own `Name: ` prefix and without
/// an `[image: …]` caption.
fn said<'a>(content: &'a str, speaker: Option<&str>) -> &'a str {
    let text = content.split(" [image: ").next().unwrap_or(content);
    speaker.and_then(|s| text.strip_prefix(s)).and_then(|rest| rest.strip_prefix(": ")).unwrap_or(text)
}

/// Fewer words than this outside a memory's questions and it is a question, not a statement.
const STATEMENT_WORDS: usize = 8;

/// Whether a memory mostly asks rather than tells ("Wow! What got you into running?"): it ends
/// in a question and says fewer than eight words of statement (a `Name:` prefix and an
/// `[image: …]` caption left out). Such a turn shares the words of a question about its topic
/// but holds no answer.
pub fn asks(content: &str, speaker: Option<&str>) -> bool {
    let body = said(content, speaker).trim();
    if !body.ends_with('?') {
        return false;
    }
    let (mut statement, mut sentence) = (0, 0);
    for word in body.split_whitespace() {
        sentence += 1;
        if word.ends_with('?') {
            sentence = 0;
        } else if word.ends_with(['.', '!']) {
            statement += sentence;
            sentence = 0;
        }
    }
    statement < STATEMENT_WORDS
}

/// Whether a conversation turn speaks about its addressee rather than its speaker: it says "you"
/// or "your" and never "I", "my", "we" or "our" (its speaker's `Name:` prefix and image caption
/// aside). "Wow, Caroline, that painting of yours is awesome!" is about Caroline, whoever says it.
pub fn addresses_the_other(content: &str, speaker: Option<&str>) -> bool {
    let body = said(content, speaker);
    let (mut first_person, mut second_person) = (false, false);
    for w in body.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’')) {
        match w.to_lowercase().replace('’', "'").as_str() {
            "you" | "your" | "you're" | "youre" | "you've" | "you'll" | "you'd" | "yours" | "yourself"
            | "ya" => second_person = true,
            "i" | "i'm" | "im" | "i've" | "i'd" | "i'll" | "my" | "me" | "mine" | "myself" | "we"
            | "we're" | "we've" | "we'll" | "our" | "us" | "ours" => first_person = true,
            _ => {}
        }
    }
    second_person && !first_person
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turns_name_prefix_is_its_speaker_and_metadata_wins() {
        assert_eq!(speaker("Caroline: I went to a support group.", &[]), Some("Caroline"));
        assert_eq!(speaker("Jean-Luc Picard: Engage.", &[]), Some("Jean-Luc Picard"));
        assert_eq!(speaker("note: the build needs rustup", &[]), None);
        assert_eq!(speaker("The deploy failed because: disk full", &[]), None);
        assert_eq!(speaker("no colon at all", &[]), None);
        let meta = vec![("speaker".to_string(), "Dana".to_string())];
        assert_eq!(speaker("Caroline: hi", &meta), Some("Dana"));
    }

    #[test]
    fn a_question_names_a_speaker_by_first_name_or_possessive() {
        assert!(names("What are Melanie's pets' names?", "Melanie"));
        assert!(names("Where did John Smith go?", "John Smith"));
        assert!(names("Where did John go?", "John Smith"));
        assert!(!names("Where did Joanna go?", "John"));
        assert!(!names("what did melanie paint", "Melanie"), "a lowercase word is not taken for a name");
    }

    #[test]
    fn list_questions_gather_and_fact_questions_do_not() {
        assert!(gathers("What activities does Melanie partake in?"));
        assert!(gathers("What books has Melanie read?"));
        assert!(gathers("What subject have Caroline and Melanie both painted?"));
        assert!(!gathers("When did Caroline go to the LGBTQ support group?"));
        assert!(!gathers("What is Caroline's identity?"));
    }

    #[test]
    fn the_named_speakers_become_they() {
        let speakers = ["Melanie", "Caroline", "John Smith"];
        assert_eq!(
            without_speakers("What are Melanie's kids' names?", speakers).as_deref(),
            Some("What are their kids' names?")
        );
        assert_eq!(
            without_speakers("What did Caroline and Melanie both paint?", speakers).as_deref(),
            Some("What did they and they both paint?")
        );
        assert_eq!(
            without_speakers("Where did John Smith go after John left?", speakers).as_deref(),
            Some("Where did they go after they left?")
        );
        assert_eq!(without_speakers("Did Melanies win?", speakers), None, "a longer word is not the name");
        assert_eq!(without_speakers("What did Gina open?", speakers), None, "Gina speaks nowhere");
    }

    #[test]
    fn a_turn_that_mostly_asks_is_a_question() {
        assert!(asks("Caroline: Wow! What got you into running?", Some("Caroline")));
        assert!(asks("Ah, they're adorable! What are their names?", None));
        assert!(asks("Mel: How'd they like it? [image: a photo of kids at a museum]", Some("Mel")));
        assert!(!asks(
            "Melanie: I've been running farther to de-stress, which has been great. How about you?",
            Some("Melanie")
        ));
        assert!(!asks("Melanie: What a day. We went camping at the beach!", Some("Melanie")));
        assert!(!asks("Caroline: Yes, I went to the support group last week.", Some("Caroline")));
    }

    #[test]
    fn a_turn_that_says_you_and_never_i_is_about_its_addressee() {
        let mel = Some("Melanie");
        assert!(addresses_the_other(
            "Melanie: Wow, Caroline, your painting is awesome! What inspired you?",
            mel
        ));
        assert!(addresses_the_other("You’re doing something amazing!", mel));
        assert!(!addresses_the_other("Melanie: Thanks! I painted it with my kids, you should try", mel));
        assert!(!addresses_the_other("Melanie: We went camping at the lake", mel));
        // The speaker's name and an image caption are not what the turn says.
        assert!(!addresses_the_other("Melanie: Look at this! [image: you can see my dog]", mel));
        // Only the speaker's own prefix is cut: a colon inside the text keeps what precedes it.
        assert!(!addresses_the_other("I have a question: can you help?", mel));
    }
}
