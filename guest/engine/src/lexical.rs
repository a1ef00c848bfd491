//! Keyword matching: a tokenizer for English and CJK text and a BM25 inverted index over slots.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::FxHashMap;

use crate::fingerprint::fingerprint;
use crate::settings::LexicalSettings;
use crate::text::is_cjk;

/// Words too common to say anything about a memory. A `match` rather than a list to scan:
/// opening a bank asks this of every word it indexes.
fn is_stopword(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "been"
            | "but"
            | "by"
            | "did"
            | "do"
            | "does"
            | "for"
            | "from"
            | "had"
            | "has"
            | "have"
            | "he"
            | "her"
            | "his"
            | "i"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "its"
            | "me"
            | "my"
            | "of"
            | "on"
            | "or"
            | "our"
            | "she"
            | "so"
            | "that"
            | "the"
            | "their"
            | "them"
            | "then"
            | "there"
            | "these"
            | "they"
            | "this"
            | "to"
            | "was"
            | "we"
            | "were"
            | "what"
            | "when"
            | "where"
            | "which"
            | "who"
            | "whom"
            | "why"
            | "will"
            | "with"
            | "you"
            | "your"
            | "how"
            | "can"
            | "would"
            | "should"
            | "could"
            | "s"
            | "t"
            | "am"
            | "than"
            | "too"
            | "very"
            | "just"
            | "about"
            | "also"
    )
}

/// Terms of a text: lower-cased words (stopwords dropped; `snake_case` identifiers kept whole and
/// split), and for CJK runs every character and every pair of adjacent characters, since those
/// scripts do not separate words with spaces.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for_each_term(text, |t| terms.push(t.to_string()));
    terms
}

/// [`tokenize`] without an allocation per term: each term is lent to `f`, in order.
pub fn for_each_term(text: &str, mut f: impl FnMut(&str)) {
    let mut word = String::new();
    let mut stemmed = String::new();
    let mut cjk = String::new();
    let mut emit_word = |word: &mut String, f: &mut dyn FnMut(&str)| {
        if word.is_empty() {
            return;
        }
        let trimmed = word.trim_matches('_');
        if trimmed.contains('_') {
            for part in trimmed.split('_').filter(|p| !p.is_empty()) {
                emit_stemmed(part, &mut stemmed, f);
            }
        }
        emit_stemmed(trimmed, &mut stemmed, f);
        word.clear();
    };
    let emit_cjk = |cjk: &mut String, f: &mut dyn FnMut(&str)| {
        let mut chars = cjk.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let end = i + c.len_utf8();
            f(&cjk[i..end]);
            if let Some(&(_, next)) = chars.peek() {
                f(&cjk[i..end + next.len_utf8()]);
            }
        }
        cjk.clear();
    };
    let f: &mut dyn FnMut(&str) = &mut f;
    for c in text.chars() {
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() || c == '_' {
                emit_cjk(&mut cjk, f);
                word.push(c.to_ascii_lowercase());
            } else {
                emit_word(&mut word, f);
                emit_cjk(&mut cjk, f);
            }
        } else if is_cjk(c) {
            emit_word(&mut word, f);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            emit_cjk(&mut cjk, f);
            word.extend(c.to_lowercase());
        } else {
            emit_word(&mut word, f);
            emit_cjk(&mut cjk, f);
        }
    }
    emit_word(&mut word, f);
    emit_cjk(&mut cjk, f);
}

fn emit_stemmed(word: &str, buffer: &mut String, f: &mut dyn FnMut(&str)) {
    if word.is_empty() || is_stopword(word) {
        return;
    }
    buffer.clear();
    stem(word, buffer);
    f(buffer);
}

/// An English word to its Porter2 (Snowball) stem, so "camped", "camping" and "camps" meet and
/// a list question finds the turns that say it in another inflection (dev split R@5 +2.4).
/// Identifiers, numbers and other scripts stay whole: a stemmer made for English words would
/// only make collisions there.
fn stem(word: &str, out: &mut String) {
    static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));
    if word.bytes().all(|b| b.is_ascii_alphabetic()) {
        out.push_str(&ENGLISH.stem(word));
    } else {
        out.push_str(word);
    }
}

#[derive(Debug, Default, Clone)]
struct Doc {
    len: u32,
    terms: Vec<u32>,
    live: bool,
    /// Of the indexed text: what a snapshot entry is checked against.
    fingerprint: u64,
}

/// Bump when `tokenize` changes the terms of any text: a snapshot written with another version is
/// ignored and every document tokenized again.
const TOKENIZER_VERSION: u32 = 2;
const SNAPSHOT_MAGIC: &[u8; 4] = b"HLX1";

/// BM25 over documents identified by slot numbers the caller assigns.
#[derive(Debug, Default)]
pub struct LexicalIndex {
    /// Fx rather than SipHash: opening a bank hashes every word of every memory, and needs no
    /// defence against crafted collisions (the words are the bank's own).
    term_ids: FxHashMap<String, u32>,
    /// postings[term] = (slot, term frequency)
    postings: Vec<Vec<(u32, u32)>>,
    docs: Vec<Doc>,
    live_docs: u32,
    total_len: u64,
    /// Documents inserted or removed since the index was last saved or restored.
    unsaved: usize,
}

impl LexicalIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, slot: u32, text: &str) {
        self.remove(slot);
        let mut ids: Vec<u32> = Vec::new();
        for_each_term(text, |term| {
            let id = match self.term_ids.get(term) {
                Some(&id) => id,
                None => {
                    let id = self.term_ids.len() as u32;
                    self.term_ids.insert(term.to_string(), id);
                    self.postings.push(Vec::new());
                    id
                }
            };
            ids.push(id);
        });
        let len = ids.len() as u32;
        // Term frequencies: runs of equal ids once sorted.
        ids.sort_unstable();
        let mut doc_terms: Vec<u32> = Vec::with_capacity(ids.len());
        for run in ids.chunk_by(|a, b| a == b) {
            self.postings[run[0] as usize].push((slot, run.len() as u32));
            doc_terms.push(run[0]);
        }
        self.place(
            slot,
            Doc { len, terms: doc_terms, live: true, fingerprint: fingerprint(text.as_bytes()) },
        );
    }

    fn place(&mut self, slot: u32, doc: Doc) {
        let slot = slot as usize;
        if self.docs.len() <= slot {
            self.docs.resize(slot + 1, Doc::default());
        }
        self.live_docs += 1;
        self.total_len += doc.len as u64;
        self.docs[slot] = doc;
        self.unsaved += 1;
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
        self.unsaved += 1;
    }

    /// Documents inserted or removed since the index was last encoded or restored.
    pub fn unsaved(&self) -> usize {
        self.unsaved
    }

    /// A snapshot of the index for the store: per document its memory id (`id_of` its slot;
    /// documents without one are left out), text fingerprint and length, and per term its
    /// postings. Opening a bank restores it instead of tokenizing every memory again.
    pub fn encode<'a>(&mut self, id_of: impl Fn(u32) -> Option<&'a str>) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&TOKENIZER_VERSION.to_le_bytes());
        let mut index_of = vec![u32::MAX; self.docs.len()];
        let mut docs = Vec::new();
        for (slot, doc) in self.docs.iter().enumerate() {
            if let (true, Some(id)) = (doc.live, id_of(slot as u32)) {
                index_of[slot] = docs.len() as u32;
                docs.push((id, doc));
            }
        }
        put_varint(&mut out, docs.len() as u64);
        for (id, doc) in &docs {
            put_bytes(&mut out, id.as_bytes());
            out.extend_from_slice(&doc.fingerprint.to_le_bytes());
            put_varint(&mut out, doc.len as u64);
        }
        // Terms nothing saved uses are left out: a hard-deleted memory's words must not outlive it.
        let mut terms: Vec<(&str, u32)> = self.term_ids.iter().map(|(t, &id)| (t.as_str(), id)).collect();
        terms.sort_unstable_by_key(|&(_, id)| id);
        let (mut saved, mut body) = (0u64, Vec::new());
        for (term, id) in terms {
            let postings: Vec<(u32, u32)> = self.postings[id as usize]
                .iter()
                .filter(|(s, _)| index_of[*s as usize] != u32::MAX)
                .map(|&(s, tf)| (index_of[s as usize], tf))
                .collect();
            if postings.is_empty() {
                continue;
            }
            saved += 1;
            put_bytes(&mut body, term.as_bytes());
            put_varint(&mut body, postings.len() as u64);
            for (doc, tf) in postings {
                put_varint(&mut body, doc as u64);
                put_varint(&mut body, tf as u64);
            }
        }
        put_varint(&mut out, saved);
        out.extend_from_slice(&body);
        self.unsaved = 0;
        out
    }

    /// Fills an empty index from a snapshot: each saved document for which `slot_of(id,
    /// fingerprint)` names a slot (its memory still exists and its text is unchanged) goes there
    /// with its saved terms. Returns which slots were filled; the caller inserts the others. A
    /// snapshot from another tokenizer version fills nothing; a malformed one is an error and
    /// leaves the index empty.
    pub fn restore(
        &mut self,
        snapshot: &[u8],
        slot_of: impl Fn(&str, u64) -> Option<u32>,
    ) -> Result<Vec<u32>, String> {
        debug_assert!(self.docs.is_empty() && self.term_ids.is_empty(), "restore into an empty index");
        let result = self.restore_from(snapshot, slot_of);
        if result.is_err() {
            *self = LexicalIndex::default();
        }
        result
    }

    fn restore_from(
        &mut self,
        snapshot: &[u8],
        slot_of: impl Fn(&str, u64) -> Option<u32>,
    ) -> Result<Vec<u32>, String> {
        let mut r = Reader(snapshot);
        if r.take(4)? != SNAPSHOT_MAGIC {
            return Err("not a keyword index snapshot".into());
        }
        if u32::from_le_bytes(r.take(4)?.try_into().expect("four bytes")) != TOKENIZER_VERSION {
            return Ok(Vec::new());
        }
        let n_docs = r.varint()? as usize;
        let mut slot_of_doc: Vec<Option<u32>> = Vec::with_capacity(n_docs.min(snapshot.len()));
        let mut restored = Vec::new();
        for _ in 0..n_docs {
            let id = std::str::from_utf8(r.bytes()?).map_err(|_| "document id is not UTF-8")?;
            let fingerprint = u64::from_le_bytes(r.take(8)?.try_into().expect("eight bytes"));
            let len = u32::try_from(r.varint()?).map_err(|_| "document length out of range")?;
            let slot =
                slot_of(id, fingerprint).filter(|&s| self.docs.get(s as usize).is_none_or(|d| !d.live));
            if let Some(slot) = slot {
                self.place(slot, Doc { len, terms: Vec::new(), live: true, fingerprint });
                restored.push(slot);
            }
            slot_of_doc.push(slot);
        }
        let n_terms = r.varint()? as usize;
        for _ in 0..n_terms {
            let term = std::str::from_utf8(r.bytes()?).map_err(|_| "term is not UTF-8")?;
            let id = self.postings.len() as u32;
            if self.term_ids.insert(term.to_string(), id).is_some() {
                return Err(format!("term {term:?} twice"));
            }
            let mut postings = Vec::new();
            for _ in 0..r.varint()? {
                let doc = r.varint()? as usize;
                let tf = u32::try_from(r.varint()?).map_err(|_| "term frequency out of range")?;
                let slot = *slot_of_doc.get(doc).ok_or("posting names no document")?;
                if let Some(slot) = slot {
                    postings.push((slot, tf));
                    self.docs[slot as usize].terms.push(id);
                }
            }
            self.postings.push(postings);
        }
        if !r.0.is_empty() {
            return Err("trailing bytes".into());
        }
        self.unsaved = 0;
        Ok(restored)
    }

    /// The documents holding `term` (as [`tokenize`] makes it), with its frequency in each.
    pub fn postings(&self, term: &str) -> &[(u32, u32)] {
        self.term_ids.get(term).map_or(&[], |&id| self.postings[id as usize].as_slice())
    }

    /// Documents indexed now.
    pub fn len(&self) -> usize {
        self.live_docs as usize
    }

    pub fn is_empty(&self) -> bool {
        self.live_docs == 0
    }

    /// BM25 score of every eligible slot that shares a term with the query, best first, at most `limit`.
    pub fn search(
        &self,
        query: &str,
        params: &LexicalSettings,
        limit: usize,
        eligible: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let mut ranked = self.scores(query, params);
        let mut found = Vec::with_capacity(limit.min(ranked.len()));
        if limit == 0 {
            return found;
        }
        // Eligibility reads each memory's record, scattered over the bank: asked best-first, a
        // query that touches most of a 100k bank asks it of about `limit` slots, not of all.
        let mut window = limit.saturating_mul(4);
        while !ranked.is_empty() {
            let head = window.min(ranked.len());
            if ranked.len() > head {
                ranked.select_nth_unstable_by(head - 1, by_score);
            }
            ranked[..head].sort_by(by_score);
            for &(slot, score) in &ranked[..head] {
                if eligible(slot) {
                    found.push((slot, score));
                    if found.len() == limit {
                        return found;
                    }
                }
            }
            ranked.drain(..head);
            window = window.saturating_mul(4);
        }
        found
    }

    /// BM25 of every slot sharing a term with the query, unordered. Scores add up in a dense
    /// array (long posting lists make a hash map the bottleneck), kept between queries and
    /// cleared where it was written: a 100k bank's array is 400 KB, which allocating and zeroing
    /// on every query cost more than the adding.
    pub fn scores(&self, query: &str, params: &LexicalSettings) -> Vec<(u32, f32)> {
        if self.live_docs == 0 {
            return Vec::new();
        }
        let n = self.live_docs as f32;
        let avg_len = (self.total_len as f32 / n).max(1.0);
        let mut query_terms = tokenize(query);
        query_terms.sort();
        query_terms.dedup();
        let postings: Vec<&[(u32, u32)]> = query_terms
            .iter()
            .filter_map(|term| self.term_ids.get(term))
            .map(|&id| self.postings[id as usize].as_slice())
            .filter(|p| !p.is_empty())
            .collect();
        if postings.is_empty() {
            return Vec::new();
        }
        let k1 = params.k1;
        let (len_base, len_scale) = (k1 * (1.0 - params.b), k1 * params.b / avg_len);
        SCORES.with_borrow_mut(|acc| {
            if acc.len() < self.docs.len() {
                acc.resize(self.docs.len(), 0.0);
            }
            let mut touched: Vec<u32> = Vec::new();
            for postings in postings {
                let df = postings.len() as f32;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
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
            touched.into_iter().map(|s| (s, std::mem::take(&mut acc[s as usize]))).collect()
        })
    }
}

thread_local! {
    /// `LexicalIndex::scores`' accumulator, all zeros between calls.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = usize::try_from(self.varint()?).map_err(|_| "length out of range")?;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_are_lowercased_stemmed_and_stopwords_dropped() {
        assert_eq!(tokenize("The CSV files failed"), vec!["csv", "file", "fail"]);
        assert_eq!(tokenize("camped camping camps"), vec!["camp", "camp", "camp"]);
        assert_eq!(tokenize("queries query"), vec!["queri", "queri"]);
        assert_eq!(
            tokenize("pandas.read_csv(encoding) utf8 v2"),
            vec!["panda", "read", "csv", "read_csv", "encod", "utf8", "v2"]
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

    fn three_docs() -> LexicalIndex {
        let mut index = LexicalIndex::new();
        index.insert(0, "flaky payments API times out");
        index.insert(1, "pandas read_csv needs utf-8-sig for 中文 files");
        index.insert(2, "user prefers PostgreSQL");
        index
    }

    const IDS: [&str; 3] = ["m0", "m1", "m2"];

    fn hits(index: &LexicalIndex, query: &str) -> Vec<(u32, f32)> {
        index.search(query, &LexicalSettings::default(), 10, |_| true)
    }

    #[test]
    fn search_returns_the_best_eligible_slots_however_few_are_eligible() {
        let mut index = LexicalIndex::new();
        for slot in 0..300u32 {
            let words = ["payment", "retry", "timeout", "csv", "encoding"];
            let text: Vec<&str> = (0..=(slot % 5)).map(|i| words[(slot as usize + i as usize) % 5]).collect();
            index.insert(slot, &text.join(" "));
        }
        let params = LexicalSettings::default();
        let by_score = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        for (limit, modulus) in [(3, 1), (3, 7), (5, 97), (10, 1000), (0, 1)] {
            let eligible = |s: u32| s.is_multiple_of(modulus);
            let mut expected: Vec<(u32, f32)> = index
                .scores("payment retry csv", &params)
                .into_iter()
                .filter(|(s, _)| eligible(*s))
                .collect();
            expected.sort_by(by_score);
            expected.truncate(limit);
            assert_eq!(
                index.search("payment retry csv", &params, limit, eligible),
                expected,
                "{limit} {modulus}"
            );
        }
    }

    #[test]
    fn a_snapshot_restores_the_same_scores() {
        let mut index = three_docs();
        let fingerprints: Vec<u64> = index.docs.iter().map(|d| d.fingerprint).collect();
        let snapshot = index.encode(|slot| Some(IDS[slot as usize]));
        assert_eq!(index.unsaved(), 0);
        let mut restored = LexicalIndex::new();
        let slots = restored
            .restore(&snapshot, |id, fp| {
                let slot = IDS.iter().position(|i| *i == id)?;
                (fingerprints[slot] == fp).then_some(slot as u32)
            })
            .unwrap();
        assert_eq!(slots, vec![0, 1, 2]);
        assert_eq!(restored.unsaved(), 0);
        for query in ["payments API", "read_csv 中文 file", "PostgreSQL user", "nothing here"] {
            assert_eq!(hits(&restored, query), hits(&index, query), "{query}");
        }
        // A restored document is removed like any other.
        restored.remove(0);
        assert!(hits(&restored, "payments").is_empty());
    }

    #[test]
    fn changed_and_unknown_documents_are_left_to_the_caller() {
        let mut index = three_docs();
        let snapshot = index.encode(|slot| Some(IDS[slot as usize]));
        let mut restored = LexicalIndex::new();
        // m1's text changed (another fingerprint); m2's memory is gone.
        let slots = restored.restore(&snapshot, |id, _| (id == "m0").then_some(0)).unwrap();
        assert_eq!(slots, vec![0]);
        assert!(hits(&restored, "read_csv").is_empty());
        assert!(hits(&restored, "PostgreSQL").is_empty());
        assert_eq!(hits(&restored, "payments")[0].0, 0);
    }

    #[test]
    fn a_snapshot_keeps_no_word_of_a_removed_or_unnamed_document() {
        let mut index = three_docs();
        index.remove(1);
        let snapshot = index.encode(|slot| (slot != 2).then(|| IDS[slot as usize]));
        let has = |needle: &str| snapshot.windows(needle.len()).any(|w| w == needle.as_bytes());
        assert!(has("payment") && has("m0"));
        assert!(!has("read_csv") && !has("中文") && !has("m1"));
        assert!(!has("postgresql") && !has("m2"));
    }

    #[test]
    fn another_tokenizer_version_or_a_damaged_snapshot_restores_nothing() {
        let mut index = three_docs();
        let snapshot = index.encode(|slot| Some(IDS[slot as usize]));
        let slot_of = |id: &str, _| IDS.iter().position(|i| *i == id).map(|s| s as u32);

        let mut other_version = snapshot.clone();
        other_version[4..8].copy_from_slice(&(TOKENIZER_VERSION + 1).to_le_bytes());
        let mut restored = LexicalIndex::new();
        assert_eq!(restored.restore(&other_version, slot_of), Ok(vec![]));
        assert!(hits(&restored, "payments").is_empty());

        for damaged in [&snapshot[..snapshot.len() - 1], &snapshot[..9], b"nonsense".as_slice()] {
            let mut restored = LexicalIndex::new();
            assert!(restored.restore(damaged, slot_of).is_err());
            assert!(hits(&restored, "payments").is_empty());
            assert_eq!(restored.docs.len(), 0);
        }
    }
}
