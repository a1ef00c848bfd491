//! How results look on a terminal. (`--json` prints their serde form, defined with the types.)
//! Text from memories is often untrusted (tool output): control and bidirectional-override
//! characters are shown escaped, never sent to the terminal.

use hindsight::time::format_iso;
use hindsight::types::{
    Audit, AuditItem, Distilled, HealthReport, HistoryEntry, ListPage, MaintainAction, MaintainReport,
    MemoryRecord, RecallResult, RetainOutcome, Status, TaskEnd, TaskState,
};

/// `text` with control characters (other than newline and tab) and bidi controls escaped.
pub fn safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\n' && c != '\t') || bidi {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// "created m123 (new memory)", "filtered (filler: …)".
pub fn outcome(o: &RetainOutcome) -> String {
    let mut text = o.action.to_string();
    if let Some(id) = &o.id {
        text.push(' ');
        text.push_str(id);
    }
    format!("{text} ({})", safe(&o.reason))
}

pub fn distilled(d: &Distilled) -> String {
    format!("  {} [{}] {}", outcome(&d.outcome), d.kind, safe(&d.content))
}

pub fn recall(result: &RecallResult) -> String {
    if result.items.is_empty() {
        return "nothing recalled".into();
    }
    let mut out = String::new();
    for (i, r) in result.items.iter().enumerate() {
        let s = &r.score;
        let mut flags = Vec::new();
        if r.memory.status != Status::Active {
            flags.push(r.memory.status.to_string());
        }
        if !r.conflicting.is_empty() {
            flags.push(format!("conflicts with {}", r.conflicting.join(", ")));
        }
        if r.possibly_stale {
            flags.push("possibly stale".into());
        }
        let multi = result.items.iter().any(|other| other.bank != r.bank) || !result.skipped_banks.is_empty();
        if multi {
            flags.push(format!("bank {}", r.bank));
        }
        let flags = if flags.is_empty() { String::new() } else { format!("  [{}]", flags.join("; ")) };
        out.push_str(&format!(
            "{}. [{:.3}] {}  ({}){flags}\n   semantic {:.3}  lexical {:.3}  recency {:.3}  confidence {:.3}  importance {:.3}  task {:.3}  source {:.3}\n",
            i + 1,
            s.total,
            safe(&r.memory.content),
            r.memory.id,
            s.semantic,
            s.lexical,
            s.recency,
            s.confidence,
            s.importance,
            s.task_match,
            s.source
        ));
    }
    if !result.skipped_banks.is_empty() {
        out.push_str(&format!("skipped (no read right): {}\n", result.skipped_banks.join(", ")));
    }
    out.push('\n');
    out.push_str(&safe(&result.prompt));
    out
}

pub fn memory(m: &MemoryRecord) -> String {
    let json = serde_json::to_string_pretty(m).expect("a memory serialises");
    format!("{}\n{}", safe(&m.content), safe(&json))
}

pub fn memory_line(m: &MemoryRecord) -> String {
    format!("{}  confidence {:.3}  used {} times  {}", m.id, m.confidence, m.access_count, safe(&m.content))
}

pub fn history(entries: &[HistoryEntry]) -> String {
    entries
        .iter()
        .map(|e| {
            let other = e.other.as_deref().map(|o| format!(" by {o}")).unwrap_or_default();
            format!(
                "{}  {:<10} {}{other}  [{}, confidence {:.2}]  {}",
                format_iso(e.at),
                e.event.to_string(),
                e.memory.id,
                e.memory.status,
                e.memory.confidence,
                safe(&e.memory.content)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn task(t: &TaskState) -> String {
    let mut lines = vec![format!("{}  v{}  {}", t.id, t.version, safe(&t.goal))];
    for (title, list) in [
        ("fact", &t.confirmed_facts),
        ("assumption", &t.assumptions),
        ("question", &t.open_questions),
        ("note", &t.notes),
    ] {
        lines.extend(list.iter().map(|x| format!("  {title}: {}", safe(x))));
    }
    for s in &t.steps {
        let tool = s.tool.as_deref().map(|t| format!(" [{}]", safe(t))).unwrap_or_default();
        let error = if s.error { " (error)" } else { "" };
        let at = s.at.map(format_iso).unwrap_or_default();
        lines.push(format!("  {at} {}{tool}{error}: {}", s.kind, safe(&s.text)));
    }
    if let Some(outcome) = t.outcome {
        let detail = t.detail.as_deref().map(|d| format!(" — {}", safe(d))).unwrap_or_default();
        lines.push(format!("  ended: {outcome}{detail}"));
    }
    lines.join("\n")
}

pub fn task_list(tasks: &[TaskState]) -> String {
    tasks
        .iter()
        .map(|t| {
            let state = t.outcome.map_or("open".to_string(), |o| o.to_string());
            format!("{}  v{}  {:<11} {}", t.id, t.version, state, safe(&t.goal))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn task_end(end: &TaskEnd) -> String {
    let mut lines = vec![format!("{} ended: {}", end.task.id, safe(&end.reason))];
    lines.extend(end.items.iter().map(distilled));
    lines.join("\n")
}

pub fn maintain(report: &MaintainReport, seconds: f64) -> String {
    let mut lines = vec![format!(
        "active {} -> {}; decayed {}, weakened {}, archived {}, merged {} ({seconds:.2} s)",
        report.active_before,
        report.active_after,
        report.decayed,
        report.weakened,
        report.count(MaintainAction::Archived),
        report.count(MaintainAction::Merged)
    )];
    for s in &report.steps {
        let into = s.into.as_deref().map(|i| format!(" into {i}")).unwrap_or_default();
        lines.push(format!("  {} {}{into}: {}", s.action, s.id, safe(&s.reason)));
    }
    lines.join("\n")
}

pub fn list(page: &ListPage) -> String {
    let mut out: Vec<String> = page.items.iter().map(memory_line).collect();
    out.push(match &page.next_cursor {
        Some(c) => format!("({} of {} shown; next page: --cursor {c})", page.items.len(), page.total),
        None => format!("({} of {} shown)", page.items.len(), page.total),
    });
    out.join("\n")
}

pub fn audit(a: &Audit) -> String {
    let section = |title: &str, items: &[AuditItem]| {
        let mut s = format!("{title} ({}):", items.len());
        for i in items.iter().take(20) {
            s.push_str(&format!(
                "\n  {} recalled {}, cited {}, helpful {}: {}",
                i.id,
                i.recalled,
                i.cited,
                i.helpful,
                safe(&i.content)
            ));
        }
        s
    };
    [
        format!("bank {} ({} recall log entries)", a.bank, a.log_entries),
        section("never useful", &a.never_useful),
        section("never recalled", &a.never_recalled),
        section("most useful", &a.most_useful),
    ]
    .join("\n")
}

pub fn health(h: &HealthReport) -> String {
    let percent = |share: f32| format!("{:.0}%", share * 100.0);
    let mut out = vec![format!(
        "bank {}: {} active ({} checked for pairs), {} findings",
        h.bank,
        h.active,
        h.checked,
        h.findings.len()
    )];
    for f in &h.findings {
        const SHOWN: usize = 10;
        let mut ids = f.ids.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if f.ids.len() > SHOWN {
            ids.push_str(&format!(", … ({} in all; --json lists them)", f.ids.len()));
        }
        out.push(format!(
            "{}: {}
  ids: {ids}
  fix: {}",
            f.kind,
            safe(&f.detail),
            f.fix
        ));
    }
    out.push(format!(
        "never recalled: {} ({}); recalled, never used: {} ({})",
        h.never_recalled,
        percent(h.never_recalled_share),
        h.recalled_unused,
        percent(h.recalled_unused_share)
    ));
    out.push(format!(
        "untrusted: {}; redacted: {}; re-extractions caught: {}",
        h.untrusted, h.redacted, h.reextractions
    ));
    if !h.growth.is_empty() {
        let days: Vec<String> = h.growth.iter().map(|d| format!("{} +{}", d.day, d.created)).collect();
        out.push(format!("growth: {}", days.join(", ")));
    }
    out.join("\n")
}

/// A hard forget's receipt.
pub fn erasure(id: &str, e: &hindsight::types::Erasure) -> String {
    let mut out = format!("{id} erased: {} memories ({})", e.memories.len(), e.memories.join(", "));
    out.push_str(&format!("\n  recall-log entries cleaned: {}", e.recall_log_entries));
    if !e.tasks.is_empty() {
        out.push_str(&format!("\n  tasks whose text was erased: {}", e.tasks.join(", ")));
    }
    for r in &e.remaining {
        out.push_str(&format!("\n  remains: {r}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(safe("red \u{1b}[31m \u{7} x"), "red \\u{1b}[31m \\u{7} x");
        assert_eq!(safe("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(safe("用户\tline\nnext"), "用户\tline\nnext");
    }
}
