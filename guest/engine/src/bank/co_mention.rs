//! Co-mention expansion, recall's second hop: the names a first pass's best hits hold (a place, a
//! title, a CJK term) lead to the other memories that name them, which may share no word with the
//! question ("Where did Caroline move from?" finds the turn about Sweden through the one that
//! says she moved from Sweden).

use std::collections::{HashMap, HashSet};

use super::Bank;
use crate::{entities, lexical};

/// Names a seed lends at most: a long memory (or CJK text, whose every pair of characters is a
/// term) would otherwise cost a posting walk per word.
const NAMES_PER_SEED: usize = 32;

/// Keyword score lent by co-mention, per (bank index, slot), from 0 to 1 (the best-lent memory).
/// Each seed (bank index, slot, weight 0..1) lends each name it holds to the other memories of its
/// bank that `may_answer` and whose own text holds it, in proportion to the name's IDF. A name
/// lends nothing when it is a hub (more than `fanout` memories say it), one of `speakers`' or one
/// of the question's terms.
pub(super) fn lent(
    banks: &[&mut Bank],
    seeds: &[(usize, u32, f32)],
    query: &str,
    speakers: &HashSet<String>,
    fanout: usize,
    may_answer: impl Fn(usize, u32) -> bool,
) -> HashMap<(usize, u32), f32> {
    let asked: HashSet<String> = lexical::tokenize(query).into_iter().collect();
    let mut own_terms: HashMap<(usize, u32), HashSet<String>> = HashMap::new();
    let mut lent: HashMap<(usize, u32), f32> = HashMap::new();
    for &(b, seed, weight) in seeds {
        let state = &banks[b].state;
        let Some(m) = state.slots.get(seed as usize).and_then(Option::as_ref) else { continue };
        let n = state.lexical.len() as f32;
        let names = entities::terms(&m.content);
        for term in
            names.iter().filter(|t| !asked.contains(*t) && !speakers.contains(*t)).take(NAMES_PER_SEED)
        {
            let postings = state.lexical.postings(term);
            // A memory's keywords include its predecessor's (`lexical.context_previous`), so a
            // name is in up to twice as many keyword documents as memories; past that it is a hub
            // whatever its own texts say.
            if postings.len() < 2 || postings.len() > 2 * fanout {
                continue;
            }
            let naming: Vec<u32> = postings
                .iter()
                .map(|&(slot, _)| slot)
                .filter(|&slot| {
                    own_terms
                        .entry((b, slot))
                        .or_insert_with(|| {
                            let text = state.slots.get(slot as usize).and_then(Option::as_ref);
                            text.map(|o| lexical::tokenize(&o.content).into_iter().collect())
                                .unwrap_or_default()
                        })
                        .contains(term)
                })
                .collect();
            if naming.len() < 2 || naming.len() > fanout {
                continue;
            }
            let idf = (n / naming.len() as f32).ln().max(0.0);
            for slot in naming.into_iter().filter(|&slot| slot != seed && may_answer(b, slot)) {
                *lent.entry((b, slot)).or_default() += weight * idf;
            }
        }
    }
    let best = lent.values().copied().fold(0.0, f32::max);
    if best > 0.0 {
        lent.values_mut().for_each(|v| *v /= best);
    }
    lent
}
