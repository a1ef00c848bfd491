//! `hindsight-dev`: the developers' tools, kept out of the product binary. `bench` measures the
//! component beside the same engine natively (and, with `--peer chroma`, beside Chroma with
//! onnxruntime on the same model); `eval` measures recall@k on LoCoMo-style turns and questions,
//! or the write path's decisions on labelled pairs (`--pairs`).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hindsight::{Hindsight, Models};

mod bench;
mod encoder;
mod error;
mod eval;
mod eval_compare;
mod eval_pairs;
mod peer;

use error::{CliError, CliResult};

#[derive(Parser)]
#[command(name = "hindsight-dev", about = "hindsight's developer tools: bench, eval and encoder")]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// A PostgreSQL database for the size bench (postgres://…); default: SQLite files in a
    /// temporary directory.
    #[arg(long, global = true, env = "HINDSIGHT_BENCH_DB", value_name = "URL")]
    pub db: Option<String>,
    /// Connections to a PostgreSQL --db.
    #[arg(long, global = true, default_value_t = hindsight::store::DEFAULT_POOL_SIZE, value_name = "N")]
    pub db_pool: usize,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    pub json: bool,
    /// Run this component file instead of the built-in one.
    #[arg(long, global = true, value_name = "PATH")]
    pub component: Option<PathBuf>,
    /// Directory holding model.onnx and tokenizer.json [default: as `hindsight --models`].
    #[arg(long, global = true, value_name = "DIR")]
    pub models: Option<PathBuf>,
    /// Engine settings: a JSON file of nested sections, e.g. {"recall": {"default_k": 3}}.
    #[arg(long, global = true, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Cap on the component's memory, in MiB.
    #[arg(long, global = true, default_value_t = 2048, value_name = "MIB")]
    pub memory_mib: usize,
    /// Deadline of one call into the component, in milliseconds.
    #[arg(long, global = true, default_value_t = 600_000, value_name = "MS")]
    pub deadline_ms: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Latency and throughput of the component, beside the engine natively (and a peer store).
    Bench(BenchArgs),
    /// Retrieval recall@k on LoCoMo-style turns and questions (JSONL), or write decisions on
    /// labelled pairs (--pairs).
    Eval(EvalArgs),
    /// The engine's encoder beside tract on the same texts: cosine min / p1 / mean, speed natively.
    Encoder(EncoderArgs),
}

#[derive(Args)]
pub struct EncoderArgs {
    /// Texts: JSON lines with a "text" (or "content") field, LoCoMo's turns.jsonl for one.
    #[arg(long, value_name = "FILE")]
    pub texts: PathBuf,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Bank sizes to measure recall at, comma-separated.
    #[arg(long, default_value = "1000,10000,100000", value_name = "N,N")]
    pub sizes: String,
    /// Timed repetitions per measurement.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub runs: usize,
    /// Also measure this store on the same model, texts and vectors (in a Python venv it sets
    /// up from the package index) and print both side by side.
    #[arg(long, value_name = "NAME", value_parser = ["chroma"])]
    pub peer: Option<String>,
    /// Texts to time ingest with embedding and recall on: JSON lines with a "text" (or
    /// "content") field, LoCoMo's turns.jsonl for one. Default: 300 synthetic memories.
    #[arg(long, value_name = "FILE")]
    pub texts: Option<PathBuf>,
}

#[derive(Args)]
pub struct EvalArgs {
    /// Write decisions on labelled pairs, one JSON object a line (id, lang, old, new, kind,
    /// label: supersede, duplicate or keep_both): precision and recall of each decision.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["turns", "questions"])]
    pub pairs: Option<PathBuf>,
    /// Turns, one JSON object a line (conv_id, dia_id, session_date, speaker, text, blip_caption).
    #[arg(long, value_name = "FILE", requires = "questions", required_unless_present_any = ["pairs", "compare"])]
    pub turns: Option<PathBuf>,
    /// Questions, one JSON object a line (conv_id, question, category, evidence).
    #[arg(long, value_name = "FILE", requires = "turns")]
    pub questions: Option<PathBuf>,
    /// Comma-separated cut-offs.
    #[arg(long, default_value = "5,10,25,50", value_name = "K,K")]
    pub k: String,
    /// Build the banks afresh instead of reusing those of an earlier run on the same turns.
    #[arg(long)]
    pub no_cache: bool,
    /// Also run with each of these recall arms off (comma-separated: person_prior,
    /// question_penalty, addressee_penalty, gathering_lexical, entity_expansion, embed_without_names,
    /// sentence_keys, context_previous, index_dates; or
    /// all, every arm on in the settings) and print each arm's contribution per category.
    #[arg(long, value_name = "ARM[,ARM]", requires = "turns")]
    pub ablate: Option<String>,
    /// Compare two `eval --json` runs on the same questions: per-category recall, the questions
    /// each run won and lost, and a paired sign test.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"], conflicts_with_all = ["turns", "questions", "pairs", "ablate"])]
    pub compare: Option<Vec<PathBuf>>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.global.json;
    let g = cli.global;
    let result = match cli.command {
        Command::Bench(args) => settings(&g).and_then(|s| bench::run(&g, builder(&g, Some(1))?, &s, &args)),
        Command::Eval(args) => match (&args.pairs, args.compare.as_deref()) {
            (Some(pairs), _) => builder(&g, Some(1)).and_then(|b| eval_pairs::run(&g, b, pairs)),
            (None, Some([a, b])) => eval_compare::run(&g, a, b),
            _ => settings(&g).and_then(|s| eval::run(&g, &s, &args)),
        },
        Command::Encoder(args) => encoder::run(&g, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if json {
                println!("{}", e.to_json());
            } else {
                eprintln!("error: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The engine settings `--settings` names (the defaults without it).
pub fn settings(g: &Global) -> CliResult<hindsight::Settings> {
    let Some(path) = &g.settings else { return Ok(hindsight::Settings::default()) };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::new("config", format!("reading settings {}: {e}", path.display())))?;
    Ok(hindsight::Settings::from_json(&text)?)
}

/// The builder every tool starts from: the global flags applied (the LLM from `HINDSIGHT_LLM_*`,
/// as the library reads it), no store chosen yet.
pub fn builder(g: &Global, workers: Option<usize>) -> CliResult<hindsight::Builder> {
    let mut b = Hindsight::builder()
        .models_dir(g.models.clone().unwrap_or_else(Models::default_dir))
        .memory_limit(g.memory_mib.saturating_mul(1 << 20))
        .deadline(Duration::from_millis(g.deadline_ms))
        .with_settings(settings(g)?);
    if let Some(component) = &g.component {
        b = b.component_file(component.clone());
    }
    if let Some(n) = workers {
        b = b.workers(n);
    }
    Ok(b)
}

/// The PostgreSQL URL `--db` names.
pub fn postgres_url(g: &Global) -> Option<&str> {
    g.db.as_deref()
}

/// `path`, or standard input for `-`.
pub fn read_input(path: &Path) -> CliResult<Vec<u8>> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .map_err(|e| CliError::new("config", format!("reading standard input: {e}")))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|e| CliError::new("not-found", format!("reading {}: {e}", path.display())))
}

/// A progress bar on a terminal (never with --json).
pub fn progress(g: &Global, len: u64, template: &str) -> Option<indicatif::ProgressBar> {
    (!g.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    })
}

/// Prints `value` as JSON with `--json`, else the text `human` makes.
pub fn print(g: &Global, value: &impl serde::Serialize, human: impl FnOnce() -> String) {
    let mut out = std::io::stdout().lock();
    if g.json {
        let _ = writeln!(out, "{}", serde_json::to_string(value).expect("results serialise"));
    } else {
        let _ = writeln!(out, "{}", human());
    }
}
