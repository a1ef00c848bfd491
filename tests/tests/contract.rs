//! The contracts that outlive a build: the component's WIT is the checked-in one, the shipped
//! component is built from the current sources, and a database written by hindsight 0.1 opens,
//! migrates once and recalls.

use std::path::{Path, PathBuf};

use hindsight::{
    store::{FORMAT_VERSION, SQLITE_FORMAT},
    types::Status,
    Error,
};
use hindsight_tests::*;
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The interfaces of package `hindsight:memory`, printed without doc comments, each with its items
/// in name order: what a component's type carries (it keeps neither docs, nor the order, nor the
/// world).
fn interfaces(resolve: &wit_parser::Resolve) -> Vec<String> {
    let text: String = print_package(resolve)
        .lines()
        .filter(|l| !l.trim_start().starts_with("///"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut blocks: Vec<String> = text
        .split("\n}\n")
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty())
        .map(|b| b.split_once("interface ").map(|(_, rest)| format!("interface {rest}")).unwrap_or(b))
        .filter(|b| b.starts_with("interface "))
        .map(|b| {
            let mut items: Vec<&str> = b.split("\n\n").collect();
            let head = items.remove(0).split_once('{').map(|(h, first)| (h.to_string(), first.to_string()));
            let (head, first) = head.expect("an interface block");
            items.push(first.trim_start_matches('\n'));
            items.sort();
            format!("{head}{{\n{}", items.join("\n\n"))
        })
        .collect();
    blocks.sort();
    blocks
}

/// The package `hindsight:memory` of a resolve, printed.
fn print_package(resolve: &wit_parser::Resolve) -> String {
    let (id, _) = resolve
        .packages
        .iter()
        .find(|(_, p)| p.name.namespace == "hindsight" && p.name.name == "memory")
        .expect("the hindsight:memory package");
    let mut printer = wit_component::WitPrinter::default();
    printer.print(resolve, id, &[]).expect("prints");
    printer.output.to_string()
}

#[test]
fn the_built_component_speaks_the_checked_in_wit() {
    let decoded = wit_component::decode(hindsight_component::WASM).expect("the component decodes");
    let mut checked_in = wit_parser::Resolve::default();
    checked_in.push_file(root().join("wit/memory.wit")).expect("wit/memory.wit parses");
    assert!(print_package(decoded.resolve()).starts_with("package hindsight:memory@0.3.0;"));
    let (built, want) = (interfaces(decoded.resolve()), interfaces(&checked_in));
    assert_eq!(want.len(), 4, "types, store, llm, api: {want:#?}");
    assert_eq!(built, want, "the component was built from another WIT than wit/memory.wit");
}

#[test]
fn the_released_wits_are_kept_unchanged() {
    for version in ["0.1.0", "0.2.0"] {
        let mut frozen = wit_parser::Resolve::default();
        frozen
            .push_file(root().join(format!("wit/since_v{version}/memory.wit")))
            .expect("a released WIT parses");
        assert!(print_package(&frozen).contains(&format!("package hindsight:memory@{version}")));
    }
}

/// sha256 over the component's sources, computed as `./dev component` computes it
/// (`find … | sort | xargs sha256sum | sha256sum`).
fn sources_sha256() -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "target") {
                    continue;
                }
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut files = Vec::new();
    for dir in ["guest/types", "guest/engine", "guest/glue", "wit"] {
        walk(&root.join(dir), &mut files);
    }
    let mut names: Vec<String> =
        files.iter().map(|p| p.strip_prefix(&root).unwrap().to_string_lossy().into_owned()).collect();
    names.sort();
    let hex = |bytes: &[u8]| Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect::<String>();
    let listing: String =
        names.iter().map(|n| format!("{}  {n}\n", hex(&std::fs::read(root.join(n)).unwrap()))).collect();
    hex(listing.as_bytes())
}

#[test]
fn the_shipped_component_is_built_from_the_current_sources() {
    assert_eq!(
        hindsight_component::SOURCES_SHA256,
        sources_sha256(),
        "guest/ or wit/ changed since the component was built: run `./dev component`"
    );
    let digest: String =
        Sha256::digest(hindsight_component::WASM).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hindsight_component::SHA256, digest);
}

#[test]
fn a_database_written_by_hindsight_0_1_is_migrated_once_and_recalled() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    std::fs::copy(root().join("tests/fixtures/format-0.1.db"), &db).unwrap();
    let version = |db: &Path| -> i64 {
        rusqlite::Connection::open(db).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
    };
    assert_eq!(version(&db), 0, "the fixture is in 0.1's unversioned layout");
    {
        let (hs, _) = sqlite(&db);
        assert_eq!(hs.banks().unwrap(), ["agent", "notes"]);
        let agent = bank(&hs, "agent");
        let stats = agent.stats().unwrap();
        assert_eq!(
            (stats.format_version, stats.total, stats.active, stats.superseded),
            (FORMAT_VERSION, 8, 7, 1)
        );
        // The default model runs on the engine's own encoder inside the component, not tract.
        assert_eq!(stats.inference, "encoder");
        let hits =
            agent.recall(query("which encoding does pandas.read_csv need for the vendor's CSV", 1)).unwrap();
        assert!(hits.items[0].memory.content.contains("utf-8-sig"), "{:?}", hits.items[0].memory.content);
        assert_eq!(agent.get("m1a22d8fa286fd745189").unwrap().status, Status::Superseded);
        assert_eq!(agent.history("m1a22d8fa478c3fb06ba").unwrap().len(), 3);
        let tasks = agent.tasks(hindsight::types::TaskFilter::All).unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(
            agent.resume_task("t1a22d8fb60b2c2ad0bf").unwrap().state().unwrap().notes,
            ["waiting for credentials"]
        );
        assert_eq!(bank(&hs, "notes").stats().unwrap().format_version, FORMAT_VERSION);
    }
    assert_eq!(version(&db), SQLITE_FORMAT);
    let (hs, _) = sqlite(&db);
    let sequence = bank(&hs, "notes").stats().unwrap().sequence;
    drop(hs);
    let (hs, _) = sqlite(&db);
    assert_eq!(
        bank(&hs, "notes").stats().unwrap().sequence,
        sequence,
        "migrated once: reopening commits nothing"
    );
}

#[test]
fn a_database_from_a_newer_hindsight_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    std::fs::copy(root().join("tests/fixtures/format-0.1.db"), &db).unwrap();
    rusqlite::Connection::open(&db).unwrap().execute_batch("PRAGMA user_version = 7;").unwrap();
    let before = std::fs::read(&db).unwrap();
    let err = hindsight::store::SqliteStore::open(&db).unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported(m) if m.contains("format 7") && m.contains(&format!("up to {SQLITE_FORMAT}"))),
        "{err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
    let out = cli(&db, &["stats", "--json"]);
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "unsupported", "{v}");
}
