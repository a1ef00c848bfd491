//! A small agent loop over hindsight: three related tasks against a scripted model. Before each
//! task the agent recalls what earlier tasks taught and puts it in its prompt; after each task
//! hindsight distils the run into memories. The second and third prompts carry the first task's
//! lesson.
//!
//! The model here is the agent runtime's own (a scripted one): any `hindsight::llm::Llm` can be lent
//! to the engine, not only the OpenAI-compatible client.
//!
//! Run: `cargo run -p hindsight-agent-loop` (after `hindsight model fetch`).

use anyhow::ensure;
use hindsight::time::DAY_MS;
use hindsight::{
    llm::{Llm, LlmError, LlmOperation, LlmRequest, LlmResponse},
    types::{NewTask, StepKind},
    Hindsight, Outcome, Query, Step,
};
use serde_json::{json, Value};

/// 2026-03-02: the loop passes time in, one day per task.
const START: i64 = 1_772_409_600_000;

/// One scripted task run: its goal, and the steps the "agent" takes.
struct Run {
    goal: &'static str,
    steps: &'static [(StepKind, &'static str, Option<&'static str>, bool)],
    answer: &'static str,
}

const RUNS: [Run; 3] = [
    Run {
        goal: "Clean the vendor CSV export for March and load it into the sales table",
        steps: &[
            (StepKind::Thought, "read the file with pandas", None, false),
            (StepKind::ToolCall, "pd.read_csv('vendor-march.csv')", Some("python"), false),
            (
                StepKind::ToolResult,
                "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xef",
                Some("python"),
                true,
            ),
            (StepKind::Thought, "the file starts with a byte-order mark", None, false),
            (
                StepKind::ToolCall,
                "pd.read_csv('vendor-march.csv', encoding='utf-8-sig')",
                Some("python"),
                false,
            ),
            (StepKind::ToolResult, "DataFrame 12,408 rows x 9 columns", Some("python"), false),
        ],
        answer: "loaded 12,408 rows into sales",
    },
    Run {
        goal: "Clean the vendor CSV export for April and load it into the sales table",
        steps: &[
            (
                StepKind::ToolCall,
                "pd.read_csv('vendor-april.csv', encoding='utf-8-sig')",
                Some("python"),
                false,
            ),
            (StepKind::ToolResult, "DataFrame 11,972 rows x 9 columns", Some("python"), false),
            (StepKind::ToolCall, "df['date'] = pd.to_datetime(df['date'])", Some("python"), false),
            (StepKind::ToolResult, "dates parsed, but 13/04/2026 became NaT", Some("python"), true),
            (
                StepKind::ToolCall,
                "df['date'] = pd.to_datetime(df['date'], dayfirst=True)",
                Some("python"),
                false,
            ),
            (StepKind::ToolResult, "all dates parsed", Some("python"), false),
        ],
        answer: "loaded 11,972 rows into sales",
    },
    Run {
        goal: "Merge the vendor CSV exports for the second quarter into one clean file",
        steps: &[
            (
                StepKind::ToolCall,
                "read each month with encoding='utf-8-sig', dayfirst=True",
                Some("python"),
                false,
            ),
            (StepKind::ToolResult, "3 DataFrames, 35,210 rows", Some("python"), false),
        ],
        answer: "wrote vendor-q2.csv",
    },
];

/// What the scripted model "learns" from each run, keyed by a word of its goal.
fn lessons_for(prompt: &str) -> Value {
    if prompt.contains("for March") {
        json!({"memories": [{
            "kind": "procedural",
            "content": "Vendor CSV exports start with a byte-order mark: read them with pandas.read_csv(..., encoding='utf-8-sig'); plain utf-8 raises UnicodeDecodeError",
            "task_type": "data-cleaning", "tags": ["csv", "vendor"], "confidence": 0.92, "failure": "none"
        }]})
    } else if prompt.contains("for April") {
        json!({"memories": [{
            "kind": "procedural",
            "content": "Vendor CSV dates are day-first (13/04/2026): parse them with pd.to_datetime(..., dayfirst=True)",
            "task_type": "data-cleaning", "tags": ["csv", "vendor", "dates"], "confidence": 0.9, "failure": "none"
        }]})
    } else {
        json!({"memories": []})
    }
}

/// The agent runtime's model: scripted answers by operation.
struct ScriptedModel;

impl Llm for ScriptedModel {
    fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, LlmError> {
        match request.operation {
            LlmOperation::Extract => {
                Ok(LlmResponse { text: lessons_for(&request.prompt).to_string(), ..Default::default() })
            }
            other => Err(LlmError::Failed(format!("no script for {other}"))),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let hs = Hindsight::builder().memory().llm(ScriptedModel).open()?;
    let bank = hs.bank("agent")?;

    let mut prompts = Vec::new();
    for (n, run) in RUNS.iter().enumerate() {
        let bank = bank.at(START + n as i64 * DAY_MS);
        // Before the task: recall what helps, and build the prompt from it.
        let recalled = bank.recall(Query::new(run.goal).k(3).task_type("data-cleaning"))?;
        let prompt = format!(
            "You are a data agent.\n{}\nTask: {}",
            if recalled.prompt.is_empty() { "(no relevant memories yet)" } else { &recalled.prompt },
            run.goal
        );
        println!("── Task {}: prompt ──\n{prompt}\n", n + 1);
        prompts.push(prompt);

        // The task itself, as working memory.
        let task = bank.begin_task(NewTask::new(run.goal).task_type("data-cleaning"))?;
        for &(kind, text, tool, error) in run.steps {
            task.step(Step { tool: tool.map(String::from), error, ..Step::new(kind, text) })?;
        }
        task.step(Step::answer(run.answer))?;

        // Hindsight: look back and keep what will help next time.
        let end = task.end(Outcome::Success)?;
        println!("── Task {}: hindsight ({}) ──", n + 1, end.reason);
        for item in &end.items {
            println!("  {} [{}] {}", item.outcome.action, item.kind, item.content);
        }
        println!();
    }

    ensure!(!prompts[0].contains("utf-8-sig"), "the first task starts with an empty memory");
    for (n, prompt) in prompts.iter().enumerate().skip(1) {
        ensure!(prompt.contains("utf-8-sig"), "task {} should start from the first task's lesson", n + 1);
    }
    ensure!(prompts[2].contains("dayfirst=True"), "task 3 should also know what task 2 learned");
    println!("The second and third prompts carry what the earlier tasks learned.");
    Ok(())
}
