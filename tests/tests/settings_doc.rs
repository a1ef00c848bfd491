//! `docs/settings.md` is generated: every key of `Settings::default()`, its default, and the doc
//! comment of its field in `guest/types/src/settings.rs`. This test regenerates it and fails
//! when the file differs; `HINDSIGHT_BLESS=1 cargo test -p hindsight-tests settings_doc` writes
//! it instead.

use std::collections::HashMap;
use std::path::Path;

use hindsight::Settings;
use serde_json::Value;

const INTRO: &str = "# Engine settings

Typed in Rust (`Hindsight::builder().settings(|s| s.maintain.capacity = 500)`), JSON everywhere
else (`--settings FILE`; the WIT `create` call's `settings` argument; the Node and Python
packages' `settings` option): nested sections, e.g.
`{\"recall\": {\"default_k\": 3}, \"maintain\": {\"capacity\": 500}}` — the table's dotted keys
name the path. Every key is optional; an unknown key is an error naming it.

This file is generated from `Settings::default()` and the doc comments in
[`guest/types/src/settings.rs`](../guest/types/src/settings.rs) (`tests/tests/settings_doc.rs`
fails when they differ; `HINDSIGHT_BLESS=1 cargo test -p hindsight-tests settings_doc` rewrites it).

| key | default | meaning |
|---|---|---|
";

/// A struct's fields as the source declares them: (name, type, doc comment).
type Fields = Vec<(String, String, String)>;

/// Every `pub struct` of the source with its documented `pub` fields.
fn structs(source: &str) -> HashMap<String, Fields> {
    let mut out: HashMap<String, Fields> = HashMap::new();
    let mut current: Option<String> = None;
    let mut doc: Vec<String> = Vec::new();
    for line in source.lines() {
        let trimmed = line.trim();
        if let Some(rest) = line.strip_prefix("pub struct ") {
            current = rest.split([' ', '{']).next().map(str::to_string);
            doc.clear();
        } else if line.starts_with('}') {
            current = None;
        } else if let Some(text) = trimmed.strip_prefix("///") {
            doc.push(text.trim().to_string());
        } else if trimmed.starts_with("#[") {
            // Attributes between a doc comment and its field.
        } else if let (Some(name), Some(field)) = (&current, trimmed.strip_prefix("pub ")) {
            if let Some((field, ty)) = field.split_once(':') {
                let ty = ty.trim().trim_end_matches(',').to_string();
                out.entry(name.clone()).or_default().push((field.trim().to_string(), ty, doc.join(" ")));
            }
            doc.clear();
        } else {
            doc.clear();
        }
    }
    out
}

fn render(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        Value::Array(items) => items.iter().map(render).collect::<Vec<_>>().join(", "),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// The table's rows under `prefix`, walking `ty`'s fields (a field whose type is a struct of
/// the source is a section).
fn rows(structs: &HashMap<String, Fields>, ty: &str, prefix: &str, defaults: &Value, out: &mut String) {
    let fields = structs.get(ty).unwrap_or_else(|| panic!("no struct {ty} in settings.rs"));
    for (name, field_ty, doc) in fields {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let value =
            defaults.get(name).unwrap_or_else(|| panic!("{key} is not in Settings::default()'s JSON"));
        if structs.contains_key(field_ty) {
            rows(structs, field_ty, &key, value, out);
        } else {
            assert!(!doc.is_empty(), "{key} has no doc comment in guest/types/src/settings.rs");
            out.push_str(&format!("| `{key}` | {} | {} |\n", render(value), doc.replace('|', "\\|")));
        }
    }
}

fn generated() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join("guest/types/src/settings.rs")).unwrap();
    // Through the JSON text: f32 defaults print as written (0.45), not widened (0.449999…).
    let defaults: Value =
        serde_json::from_str(&serde_json::to_string(&Settings::default()).unwrap()).unwrap();
    let mut out = INTRO.to_string();
    rows(&structs(&source), "Settings", "", &defaults, &mut out);
    out
}

#[test]
fn settings_doc_lists_every_setting_with_its_default() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/settings.md");
    let fresh = generated();
    if std::env::var_os("HINDSIGHT_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == fresh,
        "docs/settings.md differs from Settings::default() and the doc comments of guest/types/src/settings.rs: \
         run `HINDSIGHT_BLESS=1 cargo test -p hindsight-tests settings_doc` and commit the file"
    );
    // Every key the JSON form has is in the table.
    let defaults: Value = serde_json::to_value(Settings::default()).unwrap();
    fn leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    leaves(v, &key, out);
                }
            }
            _ => out.push(prefix.to_string()),
        }
    }
    let mut keys = Vec::new();
    leaves(&defaults, "", &mut keys);
    for key in keys {
        assert!(fresh.contains(&format!("| `{key}` |")), "{key} is missing from docs/settings.md");
    }
}
