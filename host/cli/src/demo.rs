//! `hindsight demo`: a fresh bank of realistic agent experiences, then recall for three new tasks.

use std::time::Instant;

use hindsight::time::DAY_MS;
use hindsight::{Memory, Query};

use crate::error::CliResult;

/// (days ago, JSON line): what an agent would have kept from earlier tasks.
const EXPERIENCES: &[(i64, &str)] = &[
    (
        40,
        r#"{"text":"Reading the vendor's CSV export with pandas garbled the Chinese column names; pandas.read_csv(path, encoding='utf-8-sig') fixed it because the file starts with a BOM.","kind":"procedural","task_type":"data-cleaning","tags":"csv,encoding,pandas","importance":0.8,"source":"tool-result"}"#,
    ),
    (
        38,
        r#"{"text":"处理中文CSV时，pandas.read_csv需指定encoding='utf-8-sig'，否则表头乱码。","kind":"procedural","task_type":"data-cleaning","tags":"csv,encoding","importance":0.8}"#,
    ),
    (
        30,
        r#"{"text":"The payments API at /v2/charges times out under load about once an hour; retrying after 2 s with exponential backoff (3 attempts) always succeeded.","kind":"procedural","task_type":"api-integration","tags":"payments,retry","failure_type":"transient","importance":0.7,"source":"tool-result"}"#,
    ),
    (
        25,
        r#"{"text":"The user wants PostgreSQL for every new service; do not propose MySQL or SQLite for production.","kind":"semantic","tags":"database,preference","importance":0.9,"source":"user-explicit"}"#,
    ),
    (
        21,
        r#"{"text":"用户要求所有报告使用中文撰写，数字保留两位小数。","kind":"semantic","tags":"report,preference","importance":0.85,"source":"user-explicit"}"#,
    ),
    (
        20,
        r#"{"text":"Deploying to staging failed because the DATABASE_URL secret was missing from the CI environment; adding it under Settings > Secrets fixed the pipeline.","kind":"episodic","task_type":"deployment","tags":"ci,staging","importance":0.6,"source":"tool-result"}"#,
    ),
    (
        14,
        r#"{"text":"The analytics warehouse dropped the legacy events_v1 table; queries must use events_v2 with the event_ts column instead of created.","kind":"semantic","task_type":"data-analysis","tags":"warehouse,sql","failure_type":"permanent","importance":0.8,"source":"tool-result"}"#,
    ),
    (
        10,
        r#"{"text":"For Excel exports the user prefers one sheet per region and frozen header rows.","kind":"semantic","task_type":"reporting","tags":"excel,preference","importance":0.6,"source":"user-feedback"}"#,
    ),
    (
        7,
        r#"{"text":"爬取政府网站时需要把请求间隔设为至少2秒，否则会被封IP。","kind":"procedural","task_type":"web-scraping","tags":"scraping,rate-limit","importance":0.7}"#,
    ),
    (
        5,
        r#"{"text":"Unit tests of the billing service need the TZ=UTC environment variable, otherwise the invoice date assertions fail on developer laptops.","kind":"procedural","task_type":"testing","tags":"tests,timezone","importance":0.6,"source":"tool-result"}"#,
    ),
    (
        3,
        r#"{"text":"The user corrected the agent: monthly revenue is reported net of refunds, never gross.","kind":"semantic","task_type":"reporting","tags":"revenue,correction","importance":0.9,"source":"user-feedback"}"#,
    ),
    (
        1,
        r#"{"text":"Large JSON logs (over 2 GB) parse reliably with ijson streaming; json.load ran out of memory.","kind":"procedural","task_type":"data-cleaning","tags":"json,memory","importance":0.7,"source":"tool-result"}"#,
    ),
];

const TASKS: &[(&str, Option<&str>)] = &[
    (
        "Clean the new supplier CSV file that has Chinese headers and load it into a dataframe",
        Some("data-cleaning"),
    ),
    ("Set up the database for the new inventory microservice", None),
    ("写一份本月收入的中文报告", Some("reporting")),
];

pub fn run(builder: hindsight::Builder) -> CliResult<()> {
    let started = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| crate::error::CliError::new("config", e.to_string()))?;
    let hs = builder.sqlite(dir.path().join("demo.db")).open()?;
    let t = hs.timings();
    println!(
        "component {} in {:.0?}",
        if t.component_from_cache {
            "loaded from the compiled cache"
        } else {
            "compiled (cached for next time)"
        },
        t.component_load
    );
    let now = hindsight::time::now();
    let bank = hs.bank("demo")?.at(now);
    let started_engine = Instant::now();
    hs.warm_up()?;
    let engine_start = started_engine.elapsed();
    let mut items = Vec::new();
    for (days_ago, line) in EXPERIENCES {
        items.push(Memory::from_json_line(line)?.occurred_at(now - days_ago * DAY_MS));
    }
    let t = Instant::now();
    let outcomes = bank.retain(items)?;
    println!(
        "retained {} experiences in {:.0?} (engine start {engine_start:.0?}; each one embedded in the sandbox)\n",
        outcomes.len(),
        t.elapsed(),
    );
    for (task, task_type) in TASKS {
        let mut query = Query::new(*task).k(3);
        query.task_type = task_type.map(String::from);
        let t = Instant::now();
        let result = bank.recall(query)?;
        println!("── New task: {task}  (recalled in {:.1?})", t.elapsed());
        println!("{}\n", crate::render::safe(&result.prompt));
    }
    println!("demo finished in {:.1?}", started.elapsed());
    Ok(())
}
