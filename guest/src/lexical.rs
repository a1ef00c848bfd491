//! Keyword matching: a tokenizer for English and CJK text and a BM25 inverted index over slots.

use rustc_hash::FxHashMap;

use crate::settings::LexicalSettings;

/// Words too common to say anything about a memory.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "he", "her", "his", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of",
    "on", "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "you",
    "your", "how", "can", "would", "should", "could", "s", "t", "am", "than", "too", "very", "just", "about",
    "also",
];

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3400..=0x4DBF  // CJK Extension A
        | 0x4E00..=0x9FFF  // CJK Unified Ideographs
        | 0xAC00..=0xD7AF  // Hangul syllables
        | 0xF900..=0xFAFF  // CJK Compatibility Ideographs
        | 0x20000..=0x2FFFF)
}

/// Terms of a text: lower-cased words (stopwords dropped; `snake_case` identifiers kept whole and
/// split), and for CJK runs every character and every pair of adjacent characters, since those
/// scripts do not separate words with spaces.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |word: &mut String, terms: &mut Vec<String>| {
        if word.is_empty() {
            return;
        }
        let trimmed = word.trim_matches('_');
        if trimmed.contains('_') {
            for part in trimmed.split('_').filter(|p| !p.is_empty()) {
                push_word(part, terms);
            }
        }
        push_word(trimmed, terms);
        word.clear();
    };
    let flush_cjk = |cjk: &mut Vec<char>, terms: &mut Vec<String>| {
        for (i, c) in cjk.iter().enumerate() {
            terms.push(c.to_string());
            if let Some(next) = cjk.get(i + 1) {
                terms.push([*c, *next].iter().collect());
            }
        }
        cjk.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut terms);
            cjk.push(c);
        } else if c.is_alphanumeric() || c == '_' {
            flush_cjk(&mut cjk, &mut terms);
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut terms);
            flush_cjk(&mut cjk, &mut terms);
        }
    }
    flush_word(&mut word, &mut terms);
    flush_cjk(&mut cjk, &mut terms);
    terms
}

fn push_word(word: &str, terms: &mut Vec<String>) {
    if word.is_empty() || STOPWORDS.contains(&word) {
        return;
    }
    terms.push(stem(word));
}

/// Folds English plurals ("files" meets "file", "queries" meets "query"); inflections are left
/// alone, where a crude rule would make more collisions than matches.
fn stem(word: &str) -> String {
    if word.len() <= 3 || !word.is_ascii() {
        return word.to_string();
    }
    if let Some(base) = word.strip_suffix("ies") {
        return format!("{base}y");
    }
    for keep_e in ["sses", "xes", "ches", "shes"] {
        if word.ends_with(keep_e) {
            return word[..word.len() - 2].to_string();
        }
    }
    if word.ends_with('s') && !word.ends_with("ss") && !word.ends_with("us") && !word.ends_with("is") {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

#[derive(Debug, Default, Clone)]
struct Doc {
    len: u32,
    terms: Vec<u32>,
    live: bool,
}

/// BM25 over documents identified by slot numbers the caller assigns.
#[derive(Debug, Default)]
pub struct LexicalIndex {
    /// Fx rather than SipHash: opening a bank hashes every word of every memory, and SipHash
    /// was a tenth of the open time in the component.
    term_ids: FxHashMap<String, u32>,
    /// postings[term] = (slot, term frequency)
    postings: Vec<Vec<(u32, u32)>>,
    docs: Vec<Doc>,
    live_docs: u32,
    total_len: u64,
}

impl LexicalIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, slot: u32, text: &str) {
        self.remove(slot);
        let terms = tokenize(text);
        let mut ids: Vec<u32> = Vec::with_capacity(terms.len());
        for term in terms {
            let id = match self.term_ids.get(&term) {
                Some(&id) => id,
                None => {
                    let id = self.term_ids.len() as u32;
                    self.term_ids.insert(term, id);
                    self.postings.push(Vec::new());
                    id
                }
            };
            ids.push(id);
        }
        let len = ids.len() as u32;
        // Term frequencies: runs of equal ids once sorted.
        ids.sort_unstable();
        let mut doc_terms: Vec<u32> = Vec::with_capacity(ids.len());
        for run in ids.chunk_by(|a, b| a == b) {
            self.postings[run[0] as usize].push((slot, run.len() as u32));
            doc_terms.push(run[0]);
        }
        let slot = slot as usize;
        if self.docs.len() <= slot {
            self.docs.resize(slot + 1, Doc::default());
        }
        self.docs[slot] = Doc { len, terms: doc_terms, live: true };
        self.live_docs += 1;
        self.total_len += len as u64;
    }

    pub fn remove(&mut self, slot: u32) {
        let Some(doc) = self.docs.get_mut(slot as usize) else {
            return;
        };
        if !doc.live {
            return;
        }
        let doc = std::mem::take(doc);
        for t in doc.terms {
            self.postings[t as usize].retain(|(s, _)| *s != slot);
        }
        self.live_docs -= 1;
        self.total_len -= doc.len as u64;
    }

    /// BM25 score of every eligible slot that shares a term with the query, best first, at most `limit`.
    pub fn search(
        &self,
        query: &str,
        params: &LexicalSettings,
        limit: usize,
        eligible: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let mut ranked = self.scores(query, params, eligible);
        let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if ranked.len() > limit && limit > 0 {
            ranked.select_nth_unstable_by(limit - 1, by_score);
            ranked.truncate(limit);
        }
        ranked.sort_by(by_score);
        ranked.truncate(limit);
        ranked
    }

    /// BM25 of every eligible slot sharing a term with the query. Scores add up in a dense
    /// array (long posting lists make a hash map the bottleneck), and eligibility is checked
    /// once per slot touched, not per posting.
    pub fn scores(
        &self,
        query: &str,
        params: &LexicalSettings,
        eligible: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        if self.live_docs == 0 {
            return Vec::new();
        }
        let n = self.live_docs as f32;
        let avg_len = (self.total_len as f32 / n).max(1.0);
        let mut query_terms = tokenize(query);
        query_terms.sort();
        query_terms.dedup();
        let mut acc: Vec<f32> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        for term in query_terms {
            let Some(&id) = self.term_ids.get(&term) else {
                continue;
            };
            let postings = &self.postings[id as usize];
            if postings.is_empty() {
                continue;
            }
            if acc.is_empty() {
                acc = vec![0.0; self.docs.len()];
            }
            let df = postings.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            let k1 = params.k1;
            let (len_base, len_scale) = (k1 * (1.0 - params.b), k1 * params.b / avg_len);
            for &(slot, tf) in postings {
                let len = self.docs[slot as usize].len as f32;
                let tf = tf as f32;
                let cell = &mut acc[slot as usize];
                if *cell == 0.0 {
                    touched.push(slot);
                }
                *cell += idf * tf * (k1 + 1.0) / (tf + len_base + len_scale * len);
            }
        }
        touched.into_iter().filter(|&s| eligible(s)).map(|s| (s, acc[s as usize])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_are_lowercased_stemmed_and_stopwords_dropped() {
        assert_eq!(tokenize("The CSV files failed"), vec!["csv", "file", "failed"]);
        assert_eq!(
            tokenize("pandas.read_csv(encoding)"),
            vec!["panda", "read", "csv", "read_csv", "encoding"]
        );
    }

    #[test]
    fn cjk_runs_become_unigrams_and_bigrams() {
        assert_eq!(tokenize("中文CSV"), vec!["中", "中文", "文", "csv"]);
        assert_eq!(tokenize("読み込み"), vec!["読", "読み", "み", "み込", "込", "込み", "み"]);
    }

    #[test]
    fn bm25_prefers_the_document_sharing_rare_terms() {
        let mut index = LexicalIndex::new();
        index.insert(0, "处理中文CSV时，pandas.read_csv需指定encoding='utf-8-sig'");
        index.insert(1, "The deploy script needs the staging API token");
        index.insert(2, "User prefers PostgreSQL over MySQL");
        let hits = index.search("读取中文CSV乱码", &LexicalSettings::default(), 10, |_| true);
        assert_eq!(hits[0].0, 0);
        assert_eq!(hits.len(), 1);
    }

    #[test]
    fn removed_documents_are_not_found() {
        let mut index = LexicalIndex::new();
        index.insert(0, "flaky payments API times out");
        index.insert(1, "payments need retries");
        index.remove(0);
        let hits = index.search("flaky payments", &LexicalSettings::default(), 10, |_| true);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), vec![1]);
        assert!(index.search("payments", &LexicalSettings::default(), 10, |s| s != 1).is_empty());
    }
}
