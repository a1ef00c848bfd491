use hindsight::{Hindsight, Kind, Memory, Outcome, Query, Step};

fn main() -> Result<(), hindsight::Error> {
    let db = std::env::args().nth(1).expect("db path");
    // Models from the default directory (HINDSIGHT_MODELS, else the per-user cache dir);
    // a missing model is an Error naming `hindsight model fetch`.
    let hs = Hindsight::builder().sqlite(&db).open()?;
    let bank = hs.bank("agent")?;
    let out = bank.retain([
        Memory::new("pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV")
            .kind(Kind::Procedural)
            .tags(["csv", "encoding"]),
        Memory::new("The user wants PostgreSQL for every new service"),
    ])?;
    assert_eq!(out.len(), 2);
    // Hindsight is Clone + Send + Sync: two threads recall at once.
    std::thread::scope(|s| {
        for _ in 0..2 {
            let hs = hs.clone();
            s.spawn(move || {
                let hits = hs
                    .bank("agent")
                    .unwrap()
                    .recall(Query::new("garbled headers when reading a CSV").k(1))
                    .unwrap();
                assert!(hits.items[0].memory.content.contains("utf-8-sig"));
            });
        }
    });
    let task = bank.begin_task("clean the vendor CSV")?;
    task.step(Step::tool_call("python", "pd.read_csv('v.csv')"))?;
    task.fact("the vendor CSV starts with a BOM")?;
    let end = task.end(Outcome::Success)?;
    println!("{} {:?}", bank.stats()?.active, end.method);
    Ok(())
}
