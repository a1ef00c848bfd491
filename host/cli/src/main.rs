//! `hindsight`: the command line over the `hindsight` library.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use hindsight::time::parse_iso;
use hindsight::{
    access::Scope,
    llm::OpenAi,
    types::{split_list, Distiller, EndTask, ListQuery, Named, TaskFilter, TaskUpdate},
    Bank, Hindsight, Kind, Memory, Models, Query, Step, Timestamp,
};
use serde_json::{json, Value};

mod args;
mod demo;
mod error;
mod mcp;
mod model;
mod render;
mod retain_file;
mod transfer;

use args::{BankCommand, Cli, Command, Global, ModelCommand, RecallArgs, RetainArgs, TaskCommand};
use error::{CliError, CliResult};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.global.json;
    if !matches!(cli.command, Command::Mcp(_) | Command::Serve { .. }) {
        // Output into a closed pipe (`| head`) ends the process quietly, as `ls | head` does.
        // SAFETY: restoring the default disposition of SIGPIPE before any other thread exists.
        #[cfg(unix)]
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match run(cli) {
        Ok(code) => code,
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

/// The language model from the flags and `HINDSIGHT_LLM_*` (flags win; the URL flag keeps the
/// other variables).
fn llm(g: &Global) -> CliResult<Option<OpenAi>> {
    let Some(url) = &g.llm_url else { return Ok(None) };
    let mut client = OpenAi::new(url.clone(), "default");
    client.apply_env()?;
    client.check()?;
    if let Some(model) = &g.llm_model {
        client = client.model(model.clone());
    }
    if let Some(key) = &g.llm_api_key {
        client = client.api_key(key.clone());
    }
    Ok(Some(client))
}

/// The engine settings `--settings` names (the defaults without it).
fn settings(g: &Global) -> CliResult<hindsight::Settings> {
    let Some(path) = &g.settings else { return Ok(hindsight::Settings::default()) };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::new("config", format!("reading settings {}: {e}", path.display())))?;
    Ok(hindsight::Settings::from_json(&text)?)
}

/// The builder every command starts from: the global flags applied, no store chosen yet.
fn builder(g: &Global, workers: Option<usize>) -> CliResult<hindsight::Builder> {
    let mut b = Hindsight::builder()
        .models_dir(g.models.clone().unwrap_or_else(Models::default_dir))
        .memory_limit(g.memory_mib.saturating_mul(1 << 20))
        .deadline(Duration::from_millis(g.deadline_ms));
    b = match llm(g)? {
        Some(client) => b.llm(client),
        None => b.no_llm(),
    };
    b = b.with_settings(settings(g)?);
    if let Some(component) = &g.component {
        b = b.component_file(component.clone());
    }
    if let Some(n) = workers {
        b = b.workers(n);
    }
    Ok(b)
}

/// The PostgreSQL URL `--db` names, if it names one rather than a SQLite file.
fn postgres_url(g: &Global) -> Option<&str> {
    g.db.to_str().filter(|db| db.starts_with("postgres://") || db.starts_with("postgresql://"))
}

/// The builder with `--db` as its store: a SQLite file or a PostgreSQL database.
fn with_db(b: hindsight::Builder, g: &Global) -> hindsight::Builder {
    match postgres_url(g) {
        Some(url) => b.postgres_pool(url, g.db_pool),
        None => b.sqlite(&g.db),
    }
}

/// Opens the database with one instance. Commands that only read refuse a file that does not
/// exist instead of creating an empty one in the wrong place.
fn open(g: &Global, must_exist: bool) -> CliResult<Hindsight> {
    open_with(g, must_exist, Some(1))
}

/// Opens the database with `workers` instances (the library's default for `None`: one per core,
/// up to 4), for the commands that embed many texts at once.
fn open_with(g: &Global, must_exist: bool, workers: Option<usize>) -> CliResult<Hindsight> {
    if must_exist && postgres_url(g).is_none() && !g.db.exists() {
        return Err(CliError::new(
            "not-found",
            format!(
                "no database at {} (a write creates it: retain, task begin); --db or HINDSIGHT_DB name another",
                g.db.display()
            ),
        ));
    }
    let hs = with_db(builder(g, workers)?, g).open()?;
    if g.verbose {
        let t = hs.timings();
        eprintln!(
            "component {} in {:?}",
            if t.component_from_cache { "loaded from cache" } else { "compiled" },
            t.component_load
        );
    }
    Ok(hs)
}

fn bank(g: &Global, must_exist: bool) -> CliResult<Bank> {
    Ok(open(g, must_exist)?.bank(&g.bank)?)
}

fn time(field: &str, text: &Option<String>) -> CliResult<Option<Timestamp>> {
    Ok(text.as_deref().map(|t| parse_iso(field, t)).transpose()?)
}

/// Which of the SQLite database and its -wal and -shm files hold `needle` in their bytes (a
/// store's pages keep deleted values until overwritten).
fn files_holding(db: &Path, needle: &str) -> Vec<String> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| format!("{}{suffix}", db.display()))
        .filter(|path| {
            std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

/// Prints `value` as JSON with `--json`, else the text `human` makes.
fn print(g: &Global, value: &impl serde::Serialize, human: impl FnOnce() -> String) {
    let mut out = std::io::stdout().lock();
    if g.json {
        let _ = writeln!(out, "{}", serde_json::to_string(value).expect("results serialise"));
    } else {
        let _ = writeln!(out, "{}", human());
    }
}

fn run(cli: Cli) -> CliResult<ExitCode> {
    let g = cli.global;
    match cli.command {
        Command::Model { command } => {
            let dir = g.models.clone().unwrap_or_else(Models::default_dir);
            match command {
                ModelCommand::Fetch { name } => model::fetch(&dir, &name, |msg| eprintln!("{msg}"))?,
                ModelCommand::Import { onnx, tokenizer } => model::import(&onnx, &tokenizer, &dir)?,
            }
            print(&g, &json!({"models": dir}), || format!("model ready in {}", dir.display()));
        }
        Command::Demo => demo::run(builder(&g, Some(1))?)?,
        Command::Retain(args) => return retain(&g, *args),
        Command::Mcp(pool) => {
            let hs = with_db(builder(&g, pool.workers)?, &g).open()?;
            mcp::serve_stdio(hs, g.bank.clone())?;
        }
        Command::Serve { http, auth, public_hosts, read_timeout, pool } => {
            let addr = mcp::parse_addr(&http)?;
            let auth = mcp::Auth::new(auth, addr)?;
            let listen = mcp::Listen::new(addr, &public_hosts, read_timeout)?;
            let hs = with_db(builder(&g, pool.workers)?, &g).open()?;
            mcp::serve_http(hs, g.bank.clone(), listen, auth)?;
        }
        Command::Recall(args) => recall(&g, args)?,
        Command::Get { id } => {
            let m = bank(&g, true)?.get(&id)?;
            print(&g, &m, || render::memory(&m));
        }
        Command::Share { id, to } => {
            let outcome = bank(&g, true)?.share(&id, &to)?;
            print(&g, &outcome, || {
                format!(
                    "{} in {to}: {} ({})",
                    outcome.action,
                    outcome.id.as_deref().unwrap_or("-"),
                    outcome.reason
                )
            });
        }
        Command::Forget { id: Some(id), hard: false, .. } => {
            bank(&g, true)?.forget(&id)?;
            print(&g, &json!({"id": id, "forgotten": "soft"}), || {
                format!("{id} archived (restore brings it back)")
            });
        }
        Command::Forget { id: Some(id), hard: true, dry_run, .. } => {
            if dry_run {
                return Err(CliError::field("dry_run", "goes with --matching or --tag"));
            }
            let receipt = bank(&g, true)?.forget_hard(&id)?;
            print(&g, &json!({"id": id, "forgotten": "hard", "erased": receipt}), || {
                render::erasure(&id, &receipt)
            });
        }
        Command::Forget { id: None, matching, tag, dry_run, .. } => {
            let which = ListQuery { text: matching.clone(), tag: tag.clone(), ..ListQuery::default() };
            let receipt = bank(&g, true)?.forget_hard_where(which, dry_run)?;
            let what = match (&matching, &tag) {
                (Some(text), _) => format!("memories holding {text:?}"),
                (None, Some(tag)) => format!("memories tagged {tag}"),
                (None, None) => unreachable!("clap requires --matching or --tag without an id"),
            };
            let forgotten = if dry_run { "dry-run" } else { "hard" };
            print(
                &g,
                &json!({"matching": matching, "tag": tag, "forgotten": forgotten, "erased": receipt}),
                || {
                    if dry_run {
                        let mut out = format!("would erase {} {what}:", receipt.memories.len());
                        for m in &receipt.memories {
                            out.push_str(&format!("\n  {m}"));
                        }
                        out
                    } else {
                        render::erasure(&what, &receipt)
                    }
                },
            );
        }
        Command::VerifyErasure { text, id } => {
            let needle = text.or(id).expect("clap requires --text or --id");
            let hs = open(&g, false)?;
            let store: Vec<_> = hs.traces(&needle)?;
            // PostgreSQL keeps dead tuples until VACUUM: the erase's receipt says so; its files
            // are not this host's to read.
            let files = if postgres_url(&g).is_some() { Vec::new() } else { files_holding(&g.db, &needle) };
            let clean = store.is_empty() && files.is_empty();
            print(&g, &json!({"clean": clean, "store": store, "files": files}), || {
                if clean {
                    "no trace: not in any stored key or value, nor in the database files".to_string()
                } else {
                    let mut out = String::from("traces remain:");
                    for t in &store {
                        let at = match (t.in_key, t.in_value) {
                            (true, true) => "key and value",
                            (true, false) => "key",
                            _ => "value",
                        };
                        out.push_str(&format!("\n  store {} ({at})", t.key));
                    }
                    for f in &files {
                        out.push_str(&format!("\n  file {f}"));
                    }
                    out
                }
            });
            if !clean {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Bank { command: BankCommand::Delete { name, yes } } => {
            let b = open(&g, true)?.bank(&name)?;
            if !yes {
                let stats = b.stats()?;
                return Err(CliError::field(
                    "yes",
                    format!(
                        "bank delete erases bank {name} whole ({} memories, its tasks and recall log) and cannot be undone: pass --yes",
                        stats.total
                    ),
                ));
            }
            let keys = b.delete()?;
            print(&g, &json!({"bank": name, "deleted": keys}), || {
                format!("bank {name} deleted ({keys} stored keys)")
            });
        }
        Command::Restore { id } => {
            let m = bank(&g, true)?.restore(&id)?;
            print(&g, &m, || format!("{} restored", m.id));
        }
        Command::Unsupersede { id } => {
            let m = bank(&g, true)?.unsupersede(&id)?;
            print(&g, &m, || {
                format!("{} is active again, kept beside {}", m.id, m.conflicts_with.join(", "))
            });
        }
        Command::Stats => {
            let hs = open(&g, true)?;
            let stats = hs.bank(&g.bank)?.stats()?;
            let mut v = serde_json::to_value(&stats).expect("stats serialise");
            v["llm_usage"] = serde_json::to_value(hs.llm_usage()?).expect("usage serialises");
            let banks = hs.banks()?;
            v["exists"] = json!(banks.contains(&g.bank));
            print(&g, &v, || serde_json::to_string_pretty(&v).expect("stats serialise"));
            if !banks.contains(&g.bank) {
                eprintln!("{}", no_such_bank(&g, &banks));
            }
        }
        Command::Banks => {
            let banks = open(&g, true)?.banks()?;
            print(&g, &json!({"banks": banks}), || banks.join("\n"));
        }
        Command::Feedback { ids, outcome, used, task, now } => {
            let b = bank(&g, true)?;
            let b = match time("now", &now)? {
                Some(at) => b.at(at),
                None => b,
            };
            let (memories, what) = match (used, ids, outcome) {
                (Some(used), _, _) => (b.used(split_list(&used), task.as_deref())?, json!("used")),
                (None, Some(ids), Some(outcome)) => (b.feedback(split_list(&ids), outcome)?, json!(outcome)),
                _ => return Err(CliError::field("ids", "give --ids with --outcome, or --used")),
            };
            print(&g, &json!({"outcome": what, "memories": memories}), || {
                memories.iter().map(render::memory_line).collect::<Vec<_>>().join("\n")
            });
        }
        Command::List(args) => {
            let mut q = ListQuery { order: args.order, ..ListQuery::default() };
            if let Some(status) = &args.status {
                q = q.status_named(status)?;
            }
            q.kind = args.kind;
            q.tag = args.tag;
            q.task_type = args.task_type;
            q.source = args.source;
            q.text = args.text;
            q.limit = args.limit;
            q.cursor = args.cursor;
            let page = bank(&g, true)?.list(q)?;
            print(&g, &page, || render::list(&page));
        }
        Command::Correct { id, text } => {
            let c = bank(&g, true)?.correct(&id, &text)?;
            print(&g, &c, || {
                let mut out = format!("{} supersedes {}: {}", c.memory.id, c.superseded, c.memory.content);
                for x in &c.cascade {
                    out.push_str(&format!("\n  {} confidence {:.2} -> {:.2}", x.id, x.before, x.after));
                }
                out
            });
        }
        Command::Explain { id } => {
            let x = bank(&g, true)?.explain(&id)?;
            let v = to_json(&x);
            print(&g, &v, || serde_json::to_string_pretty(&v).expect("json"));
        }
        Command::Health { now } => {
            let b = bank(&g, true)?;
            let b = match time("now", &now)? {
                Some(at) => b.at(at),
                None => b,
            };
            let report = b.health()?;
            print(&g, &report, || render::health(&report));
        }
        Command::Audit => {
            let a = bank(&g, true)?.audit()?;
            print(&g, &a, || render::audit(&a));
        }
        Command::Export { vectors } => transfer::export(&g, vectors)?,
        Command::Import { file, reembed } => transfer::import(&g, &file, reembed)?,
        Command::Reembed { to } => {
            // `reembed --models NEW` (the current model is the default one), or
            // `--models CURRENT reembed --to-models NEW`.
            let (current, new) = match (to, &g.models) {
                (Some(to), current) => (current.clone(), to),
                (None, Some(new)) => (None, new.clone()),
                (None, None) => {
                    return Err(CliError::field(
                        "models",
                        "name the new model's directory: reembed --models DIR",
                    ))
                }
            };
            transfer::reembed(&Global { models: current, ..g.clone() }, &new)?
        }
        Command::History { id } => {
            let entries = bank(&g, true)?.history(&id)?;
            print(&g, &json!({"id": id, "entries": entries}), || render::history(&entries));
        }
        Command::Task { command } => task(&g, command)?,
        Command::Consolidate { since } => {
            let since = time("since", &since)?;
            let b = bank(&g, true)?;
            let items = b.consolidate(since)?;
            print(&g, &with_usage(&json!({"items": items}), b.last_usage()), || {
                items.iter().map(render::distilled).collect::<Vec<_>>().join("\n")
            });
        }
        Command::Maintain { now, allow_future, dry_run } => {
            let b = bank(&g, true)?;
            let b = match time("now", &now)? {
                Some(at)
                    if at > hindsight::time::now() + hindsight::time::DAY_MS && !allow_future && !dry_run =>
                {
                    return Err(CliError::field(
                        "now",
                        format!(
                            "{} is more than a day after the wall clock: maintain would age every memory by \
                             that much (and archive most); --allow-future if that is meant, --dry-run to see",
                            hindsight::time::format_iso(at)
                        ),
                    ));
                }
                Some(at) => b.at(at),
                None => b,
            };
            let started = Instant::now();
            let report = if dry_run { b.maintain_dry_run()? } else { b.maintain()? };
            let seconds = started.elapsed().as_secs_f64();
            let mut v = serde_json::to_value(&report).expect("reports serialise");
            v["seconds"] = json!((seconds * 1000.0).round() / 1000.0);
            v["dry_run"] = json!(dry_run);
            let v = with_usage(&v, b.last_usage());
            print(&g, &v, || {
                let text = render::maintain(&report, seconds);
                if dry_run {
                    format!("{text}\n(dry run: nothing was changed)")
                } else {
                    text
                }
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn recall(g: &Global, args: RecallArgs) -> CliResult<()> {
    let mut query = Query::new(args.query);
    query.k = args.k;
    query.now = time("now", &args.now)?;
    query.task_type = args.task_type;
    if let Some(kinds) = &args.kinds {
        query.kinds = split_list(kinds).iter().map(|k| Kind::parse("kinds", k)).collect::<Result<_, _>>()?;
    }
    query.tags = args.tags.as_deref().map(split_list).unwrap_or_default();
    query.scope = Scope::parse("scope", args.scope.map(|s| s.as_str()), args.scope_id)?;
    query.min_score = args.min_score;
    query.prompt_tokens = args.prompt_tokens;
    query.include_superseded = args.include_superseded;
    query.trusted_only = args.trusted_only;
    query.as_of = time("as_of", &args.as_of)?;
    query.task_id = args.task;
    let hs = open(g, true)?;
    let (result, usage) = match &args.banks {
        Some(banks) => (hs.recall(split_list(banks), query)?, None),
        None => {
            let b = hs.bank(&g.bank)?;
            (b.recall(query)?, b.last_usage())
        }
    };
    print(g, &with_usage(&result, usage), || render::recall(&result));
    if result.items.is_empty() {
        let banks = hs.banks()?;
        if !banks.contains(&g.bank) {
            eprintln!("{}", no_such_bank(g, &banks));
        }
    }
    Ok(())
}

/// What to say when `--bank` names a bank the database does not hold (a mistyped name, a copy of
/// a database without its `-wal`).
fn no_such_bank(g: &Global, banks: &[String]) -> String {
    format!(
        "hint: bank {:?} holds nothing in {}; its banks: {} (--bank or HINDSIGHT_BANK picks one)",
        g.bank,
        g.db.display(),
        if banks.is_empty() { "none yet".to_string() } else { banks.join(", ") }
    )
}

fn task(g: &Global, command: TaskCommand) -> CliResult<()> {
    let b = bank(g, !matches!(command, TaskCommand::Begin { .. }))?;
    let (id, update, expected) = match command {
        TaskCommand::Begin { goal, task_type } => {
            let mut new = hindsight::types::NewTask::new(goal);
            new.task_type = task_type;
            let state = b.begin_task(new)?.state()?;
            print(g, &state, || state.id.clone());
            return Ok(());
        }
        TaskCommand::Show { id } => {
            let state = b.resume_task(&id)?.state()?;
            print(g, &state, || render::task(&state));
            return Ok(());
        }
        TaskCommand::List { all } => {
            let tasks = b.tasks(if all { TaskFilter::All } else { TaskFilter::Open })?;
            print(g, &json!({"tasks": tasks}), || render::task_list(&tasks));
            return Ok(());
        }
        TaskCommand::End { id, outcome, detail, force } => {
            let mut end = EndTask::new(outcome);
            end.detail = detail;
            end.force = force;
            let ended = b.resume_task(&id)?.end(end)?;
            print(g, &with_usage(&ended, b.last_usage()), || render::task_end(&ended));
            return Ok(());
        }
        TaskCommand::Distill { id, rules } => {
            let ended =
                b.resume_task(&id)?.distill(if rules { Distiller::Rules } else { Distiller::Auto })?;
            print(g, &with_usage(&ended, b.last_usage()), || render::task_end(&ended));
            return Ok(());
        }
        TaskCommand::Delete { id, hard } => {
            if !hard {
                return Err(CliError::field(
                    "hard",
                    "task delete erases the task's record for good: pass --hard",
                ));
            }
            b.delete_task(&id)?;
            print(g, &json!({"id": id, "deleted": "hard"}), || format!("{id} erased"));
            return Ok(());
        }
        TaskCommand::Step { id, kind, text, tool, error, step_id, version } => {
            let step = Step { tool, error, id: step_id, ..Step::new(kind, text) };
            (id, TaskUpdate::Step(step), version.expect_version)
        }
        TaskCommand::Fact(t) => (t.id, TaskUpdate::Fact(t.text), t.version.expect_version),
        TaskCommand::Assume(t) => (t.id, TaskUpdate::Assumption(t.text), t.version.expect_version),
        TaskCommand::Question(t) => (t.id, TaskUpdate::Question(t.text), t.version.expect_version),
        TaskCommand::Note(t) => (t.id, TaskUpdate::Note(t.text), t.version.expect_version),
    };
    let state = b.resume_task(&id)?.update(update, expected)?;
    print(g, &state, || format!("{} at version {}", state.id, state.version));
    Ok(())
}

/// The item the `retain` flags describe (for `--file`, the defaults every line starts from).
fn item_from_flags(args: &RetainArgs) -> CliResult<Memory> {
    let mut m = Memory::new(args.text.clone().unwrap_or_default());
    m.kind = args.kind;
    m.importance = args.importance;
    m.confidence = args.confidence;
    m.source = args.source;
    m.task_type = args.task_type.clone();
    m.task_description = args.task_description.clone();
    m.context = args.context.clone();
    m.tags = args.tags.as_deref().map(split_list).unwrap_or_default();
    m.scope = Scope::parse("scope", args.scope.map(|s| s.as_str()), args.scope_id.clone())?;
    m.agent_id = args.agent_id.clone();
    m.failure_type = args.failure_type;
    m.occurred_at = time("at", &args.at)?;
    m.valid_until = time("valid_until", &args.valid_until)?;
    for pair in &args.meta {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| CliError::field("meta", format!("{pair:?} is not key=value")))?;
        m.metadata.push((k.to_string(), v.to_string()));
    }
    m.force = args.force;
    m.parallel = args.parallel;
    m.sequence = args.sequence;
    Ok(m)
}

fn retain(g: &Global, args: RetainArgs) -> CliResult<ExitCode> {
    let defaults = item_from_flags(&args)?;
    match (&args.text, &args.file) {
        (Some(_), _) => {
            let b = bank(g, false)?;
            let outcome = b.retain([defaults]).map_err(CliError::single_item)?.remove(0);
            print(g, &with_usage(&outcome, b.last_usage()), || render::outcome(&outcome));
            Ok(ExitCode::SUCCESS)
        }
        (None, Some(file)) => retain_file::run(g, file, args.batch, defaults),
        (None, None) => Err(CliError::field("text", "retain needs --text TEXT or --file items.jsonl")),
    }
}

/// `path`, or standard input for `-`.
pub fn read_input(path: &Path) -> CliResult<Vec<u8>> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .map_err(|e| CliError::new("config", format!("reading standard input: {e}")))?;
        return Ok(bytes);
    }
    if path.is_dir() {
        return Err(CliError::new("config", format!("{} is a directory, not a file", path.display())));
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

/// Values for `--json` output.
pub fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("results serialise")
}

/// A result for `--json` with what the call cost under `usage`.
fn with_usage(value: &impl serde::Serialize, usage: Option<hindsight::types::Usage>) -> Value {
    let mut v = to_json(value);
    if let (Some(usage), Value::Object(map)) = (usage, &mut v) {
        map.insert("usage".into(), to_json(&usage));
    }
    v
}
