//! `export`, `import` and `reembed`: moving a bank between stores and models, streamed so a
//! large bank never sits whole in this process.

use std::io::{BufWriter, Seek, Write};
use std::path::Path;
use std::time::Instant;

use hindsight::types::Vectors;
use hindsight::Models;
use serde_json::json;

use crate::args::Global;
use crate::error::{CliError, CliResult};
use crate::{bank, builder, print, progress, with_db};

pub fn export(g: &Global, vectors: bool) -> CliResult<()> {
    let b = bank(g, true)?;
    let started = Instant::now();
    let bar = progress(g, 0, "{spinner} exported {pos} lines ({per_sec})");
    let mut out = BufWriter::new(std::io::stdout().lock());
    let written = b.export(if vectors { Vectors::Include } else { Vectors::Omit }, |line| {
        writeln!(out, "{line}").map_err(|e| hindsight::Error::invalid("output", e.to_string()))?;
        if let Some(bar) = &bar {
            bar.inc(1);
        }
        Ok(())
    })?;
    out.flush().map_err(|e| CliError::new("config", format!("writing the export: {e}")))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
        eprintln!("exported {written} lines of bank {} in {:.1} s", b.id(), started.elapsed().as_secs_f64());
    }
    Ok(())
}

pub fn import(g: &Global, file: &Path, reembed: bool) -> CliResult<()> {
    // Import reads its file twice (a check, then the commits): standard input is spooled first.
    let f = if file == Path::new("-") {
        let mut spool =
            tempfile::tempfile().map_err(|e| CliError::new("config", format!("a temporary file: {e}")))?;
        std::io::copy(&mut std::io::stdin().lock(), &mut spool)
            .map_err(|e| CliError::new("config", format!("reading standard input: {e}")))?;
        spool
    } else {
        std::fs::File::open(file)
            .map_err(|e| CliError::new("not-found", format!("reading {}: {e}", file.display())))?
    };
    let mut reader = std::io::BufReader::with_capacity(1 << 20, f);
    reader.rewind().map_err(|e| CliError::new("config", format!("reading the export: {e}")))?;
    let b = bank(g, false)?;
    let started = Instant::now();
    let bar = progress(g, 0, "{spinner} imported {pos} lines ({per_sec})");
    let report = b
        .import(reader, reembed, |lines| {
            if let Some(bar) = &bar {
                bar.set_position(lines);
            }
        })
        .map_err(at_line)?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut v = crate::to_json(&report);
    v["bank"] = json!(b.id());
    v["seconds"] = json!((seconds * 1000.0).round() / 1000.0);
    print(g, &v, || {
        format!(
            "imported into {}: {} memories ({} embedded here), {} tasks, {} recall log entries in {seconds:.1} s",
            b.id(),
            report.memories,
            report.embedded,
            report.tasks,
            report.log_entries
        )
    });
    Ok(())
}

pub fn reembed(g: &Global, to: &Path) -> CliResult<()> {
    let b = bank(g, true)?;
    let models = Models::from_dir(to)?;
    let target = with_db(builder(g, None)?.models(models), g).open()?;
    let started = Instant::now();
    let bar = progress(g, 0, "{spinner} embedded {pos} memories ({per_sec})");
    let switched = b.reembed(&target, |done| {
        if let Some(bar) = &bar {
            bar.set_position(done);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let seconds = started.elapsed().as_secs_f64();
    let model = target.model_id()?;
    let v = json!({"bank": b.id(), "memories": switched, "embedding_model": model, "seconds": (seconds * 1000.0).round() / 1000.0});
    print(g, &v, || {
        format!(
            "bank {} now uses {model} ({switched} memories re-embedded in {seconds:.1} s); open it with --models {}",
            b.id(),
            to.display()
        )
    });
    Ok(())
}

/// An import error naming a line of the file (`line 12: …`) as the CLI reports lines: in `line`.
fn at_line(e: hindsight::Error) -> CliError {
    if let hindsight::Error::InvalidInput(f) = &e {
        if let Some(n) = f.field.strip_prefix("line ").and_then(|n| n.parse::<usize>().ok()) {
            return CliError::new("invalid-input", f.message.clone()).at_line(n);
        }
    }
    e.into()
}
