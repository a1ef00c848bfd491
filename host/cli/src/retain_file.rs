//! `retain --file`: JSONL in batches. A bad line (invalid UTF-8, not JSON, a wrong field) is
//! reported with its number and the rest still goes in; with `--json`, each line is acknowledged
//! once its batch is committed, so an id that was printed survives a crash.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use hindsight::{Bank, Memory};
use serde_json::json;

use crate::args::Global;
use crate::error::{CliError, CliResult};

/// The most lines one call into the component takes (the engine's `limits.max_items_per_retain`
/// default).
const MAX_BATCH: usize = 1000;

pub fn run(g: &Global, file: &Path, batch: usize, defaults: Memory) -> CliResult<ExitCode> {
    if !(1..=MAX_BATCH).contains(&batch) {
        return Err(CliError::field("batch", format!("must be from 1 to {MAX_BATCH}, got {batch}")));
    }
    let bytes = crate::read_input(file)?;
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let progress = crate::progress(g, lines.len() as u64, "{bar:40} {pos}/{len} {per_sec} eta {eta}");
    let mut run = FileRetain {
        // An instance per core: a batch's texts embed on all of them.
        bank: crate::open_with(g, false, None)?.bank(&g.bank)?,
        json: g.json,
        progress,
        stored: 0,
        rejected: 0,
        pending: Vec::new(),
    };
    for (i, raw) in lines.into_iter().enumerate() {
        let number = i + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            Err(e) => {
                run.reject(number, None, &format!("is not valid UTF-8 (byte {})", e.valid_up_to()));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match Memory::from_json_line(text) {
            Ok(item) => run.pending.push((number, with_defaults(item, &defaults))),
            Err(e) => run.reject(number, Some(&e.field), &e.message),
        }
        if run.pending.len() >= batch {
            run.flush()?;
        }
    }
    run.flush()?;
    if let Some(bar) = &run.progress {
        bar.finish_and_clear();
    }
    if !g.json {
        eprintln!("retained {}, rejected {}", run.stored, run.rejected);
    }
    Ok(if run.rejected > 0 { ExitCode::from(2) } else { ExitCode::SUCCESS })
}

/// A line's own fields win; what it leaves unset comes from the command-line flags.
fn with_defaults(mut item: Memory, d: &Memory) -> Memory {
    item.kind = item.kind.or(d.kind);
    item.importance = item.importance.or(d.importance);
    item.confidence = item.confidence.or(d.confidence);
    item.source = item.source.or(d.source);
    item.task_type = item.task_type.or_else(|| d.task_type.clone());
    item.task_description = item.task_description.or_else(|| d.task_description.clone());
    item.context = item.context.or_else(|| d.context.clone());
    if item.tags.is_empty() {
        item.tags = d.tags.clone();
    }
    item.scope = item.scope.or_else(|| d.scope.clone());
    item.agent_id = item.agent_id.or_else(|| d.agent_id.clone());
    item.failure_type = item.failure_type.or(d.failure_type);
    item.occurred_at = item.occurred_at.or(d.occurred_at);
    item.valid_until = item.valid_until.or(d.valid_until);
    for (k, v) in &d.metadata {
        if !item.metadata.iter().any(|(key, _)| key == k) {
            item.metadata.push((k.clone(), v.clone()));
        }
    }
    item.force |= d.force;
    item.parallel |= d.parallel;
    item.sequence |= d.sequence;
    item
}

struct FileRetain {
    bank: Bank,
    json: bool,
    progress: Option<indicatif::ProgressBar>,
    stored: usize,
    rejected: usize,
    pending: Vec<(usize, Memory)>,
}

impl FileRetain {
    fn reject(&mut self, line: usize, field: Option<&str>, message: &str) {
        self.rejected += 1;
        let shown = match field {
            Some(field) => format!("{field}: {message}"),
            None => message.to_string(),
        };
        if self.json {
            let error = json!({"kind": "invalid-input", "message": shown, "field": field, "line": line});
            println!("{}", json!({"line": line, "error": error}));
        } else {
            eprintln!("line {line}: {}", crate::render::safe(&shown));
        }
        self.advance(1);
    }

    fn advance(&self, n: usize) {
        if let Some(bar) = &self.progress {
            bar.inc(n as u64);
        }
    }

    /// Retains the pending batch. An invalid item is named by the engine (its index in the
    /// batch): that line is reported and dropped, and the rest retried.
    fn flush(&mut self) -> CliResult<()> {
        // Embedded once, across the workers: a retry after a refused line keeps the vectors.
        let mut items: Vec<Memory> = self.pending.iter().map(|(_, m)| m.clone()).collect();
        self.bank.embed_missing(&mut items)?;
        for ((_, pending), item) in self.pending.iter_mut().zip(items) {
            *pending = item;
        }
        while !self.pending.is_empty() {
            let items: Vec<Memory> = self.pending.iter().map(|(_, m)| m.clone()).collect();
            match self.bank.retain(items) {
                Ok(outcomes) => {
                    if self.json {
                        let mut out = std::io::stdout().lock();
                        for ((line, _), o) in self.pending.iter().zip(&outcomes) {
                            let mut ack = crate::to_json(o);
                            ack["line"] = json!(line);
                            let _ = writeln!(out, "{ack}");
                        }
                        let _ = out.flush();
                    }
                    self.stored += outcomes.len();
                    self.advance(outcomes.len());
                    self.pending.clear();
                }
                Err(hindsight::Error::InvalidInput(f))
                    if f.item.is_some_and(|ix| ix < self.pending.len()) =>
                {
                    let (line, _) = self.pending.remove(f.item.unwrap_or_default());
                    self.reject(line, Some(&f.field), &f.message);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
