//! What each tool is for, as the calling model reads it in `tools/list`.

pub const MEMORY_WRITE: &str = "Keep a memory for future tasks: what worked, what failed and why, a user's constraint or preference. Returns what became of it: action created, reinforced (a duplicate), merged, superseded (it replaced an older memory that it contradicts) or filtered (not worth keeping), with the memory's id and the reason.";
pub const MEMORY_SEARCH: &str = "Recall the memories that matter for a task or question, best first, scored by meaning, keywords, recency, confidence and source. Returns `items` (each with id, content, kind, score breakdown, and flags for conflicting or possibly stale memories) and `prompt`, a block ready to put in your context.";
pub const MEMORY_SUMMARIZE: &str = "End a task and keep its lessons (hindsight): give task_id and outcome, or pass a whole trajectory (goal, steps, outcome) to distil. Uses the host's language model when one is configured, rules otherwise. Returns the method, the reason, and each candidate memory with what became of it.";
pub const MEMORY_FORGET: &str = "Forget a memory by id: soft (the default) archives it — no longer recalled, restorable; hard erases it from the store.";
pub const MEMORY_FEEDBACK: &str = "Say how recalled memories worked out: success (following them worked), failure (it did not) or correction (the user corrected them). Adjusts their confidence; returns the updated memories.";
pub const MEMORY_TASK_DELETE: &str = "Erase a task's working memory (its steps, facts and notes) for good, e.g. when it holds a secret. Memories distilled from it stay (forget those with memory_forget).";
pub const MEMORY_HISTORY: &str = "The history of a memory: the memories it replaced or absorbed and what replaced it, with times (event created, superseded, merged or archived).";
pub const MEMORY_SHARE: &str = "Share a memory: copy it into another bank (e.g. a shared space other agents recall from) through that bank's duplicate, update and conflict checks; the copy's metadata.shared_from names the bank and id it came from. Returns what became of the copy.";
pub const MEMORY_LIST: &str = "List a bank's memories by kind, status, tag, task type, source and a text filter, newest or most recalled first, a page at a time: returns items, next_cursor (pass it back as cursor for the next page) and total.";
pub const MEMORY_GET: &str =
    "One memory by id, whatever its status (active, superseded, merged or archived), with all its fields.";
pub const MEMORY_CORRECT: &str = "Correct a wrong memory: the given text replaces it as a new memory (source user-feedback, high confidence) that supersedes it, and active memories close to the old content lose some confidence. Returns the new memory, the superseded id, and every memory whose confidence was lowered (cascade).";
pub const MEMORY_EXPLAIN: &str = "Explain a memory: where it came from (source, agent, the task it was distilled from with its steps, the episodes it was consolidated from, what it replaced), every feedback event, and every recall that returned it, with counts (recalled, cited, helpful).";
pub const MEMORY_AUDIT: &str = "Audit a bank from its recall log: memories recalled often but never cited or helpful (never_useful), never recalled, and the most useful.";
pub const MEMORY_HEALTH: &str = "A bank's health: duplicates and contradictions left active, stale memories (expired, low confidence, never recalled), the shares never recalled and recalled but never used, untrusted and redacted counts, re-extraction loops caught, and growth per day. Each finding lists the memory ids and the command that fixes it (maintain, forget ID). Changes nothing.";
pub const MEMORY_STATS: &str =
    "Counts of a bank's memories by status and kind, its embedding model and stored format.";
pub const MEMORY_RESTORE: &str = "Bring an archived (softly forgotten) memory back. Returns the memory.";
pub const MEMORY_BANKS: &str = "The banks in the store (those the caller may read, with auth).";
pub const MEMORY_UNSUPERSEDE: &str = "Undo a wrong supersede: a superseded memory (see memory_history) becomes active again and is kept beside the memory that replaced it, both flagged as conflicting, so the same pair is not superseded again. Returns the memory.";
