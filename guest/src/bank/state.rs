//! The in-memory image of a bank: its records by slot, and the vector and keyword indexes over them.

use std::collections::HashMap;

use crate::index::VectorIndex;
use crate::lexical::LexicalIndex;
use crate::prompt;
use crate::record::Memory;
use crate::settings::LexicalSettings;

/// The in-memory image of the bank's store keys, at sequence `applied`.
pub(super) struct State {
    pub(super) applied: u64,
    pub(super) has_meta: bool,
    pub(super) slots: Vec<Option<Memory>>,
    pub(super) by_id: HashMap<String, u32>,
    pub(super) free: Vec<u32>,
    pub(super) vectors: VectorIndex,
    pub(super) lexical: LexicalIndex,
}

impl State {
    pub(super) fn empty(dim: usize) -> State {
        State {
            applied: 0,
            has_meta: false,
            slots: Vec::new(),
            by_id: HashMap::new(),
            free: Vec::new(),
            vectors: VectorIndex::new(dim),
            lexical: LexicalIndex::new(),
        }
    }

    pub(super) fn memory(&self, id: &str) -> Option<&Memory> {
        self.by_id.get(id).and_then(|&s| self.slots[s as usize].as_ref())
    }

    /// Places a memory and its vector; its keyword document is built by `index_lexical` once
    /// the memories it may draw context from are in place too.
    pub(super) fn insert(&mut self, memory: Memory, vector: &[f32]) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.vectors.insert(slot, vector);
        self.by_id.insert(memory.id.clone(), slot);
        self.slots[slot as usize] = Some(memory);
        slot
    }

    /// The ids of the memories a memory follows in its sequence, nearest first, at most `n`.
    pub(super) fn predecessors(&self, memory: &Memory, n: u32) -> Vec<&Memory> {
        let mut out = Vec::new();
        let mut next = memory.follows.as_deref();
        while let Some(id) = next {
            if out.len() as u32 >= n {
                break;
            }
            let Some(prev) = self.memory(id) else { break };
            out.push(prev);
            next = prev.follows.as_deref();
        }
        out
    }

    /// The keyword document of a memory: its content, the words of its date (month and year)
    /// when dates are indexed, and the content of the memories just before it in its sequence.
    pub(super) fn index_lexical(&mut self, slot: u32, settings: &LexicalSettings) {
        let Some(memory) = self.slots[slot as usize].as_ref() else { return };
        let mut doc = memory.content.clone();
        if settings.index_dates {
            doc.push(' ');
            doc.push_str(&prompt::month_year(memory.occurred_at));
        }
        for prev in self.predecessors(memory, settings.context_previous) {
            doc.push(' ');
            doc.push_str(&prev.content);
        }
        self.lexical.insert(slot, &doc);
    }

    /// Replaces a record whose indexed content is unchanged.
    pub(super) fn update(&mut self, memory: Memory) {
        if let Some(&slot) = self.by_id.get(&memory.id) {
            self.slots[slot as usize] = Some(memory);
        }
    }

    /// Removes a memory from every index and its words from the documents that drew on it;
    /// `relinked` are its successors' records, already pointing past it.
    pub(super) fn remove(&mut self, id: &str, relinked: Vec<Memory>, settings: &LexicalSettings) {
        let Some(slot) = self.by_id.get(id).copied() else { return };
        // Found through the old links, before `relinked` replaces them.
        let dependents: Vec<u32> = self
            .by_id
            .values()
            .copied()
            .filter(|&s| {
                self.slots[s as usize].as_ref().is_some_and(|m| {
                    self.predecessors(m, settings.context_previous).iter().any(|p| p.id == id)
                })
            })
            .collect();
        for m in relinked {
            self.update(m);
        }
        self.by_id.remove(id);
        self.vectors.remove(slot);
        self.lexical.remove(slot);
        self.slots[slot as usize] = None;
        self.free.push(slot);
        for s in dependents {
            self.index_lexical(s, settings);
        }
    }
}
