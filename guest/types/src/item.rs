//! What a caller retains: a memory's text and whichever fields it wants to set, as a builder, and
//! as the JSON object of a `retain --file` line.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::FieldError;
use crate::names::{FailureType, Kind, Named, ScopeLevel, Source};
use crate::time::{parse_iso, Timestamp};

/// How widely a memory applies: everywhere, or one project or session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// Global, project or session.
    pub level: ScopeLevel,
    /// The project or session id; none for global.
    pub id: Option<String>,
}

impl Scope {
    /// Applies everywhere.
    pub const GLOBAL: Scope = Scope { level: ScopeLevel::Global, id: None };

    /// One project.
    pub fn project(id: impl Into<String>) -> Scope {
        Scope { level: ScopeLevel::Project, id: Some(id.into()) }
    }

    /// One session.
    pub fn session(id: impl Into<String>) -> Scope {
        Scope { level: ScopeLevel::Session, id: Some(id.into()) }
    }

    /// From a level's name and an optional id (flags, JSON); the error names `field`.
    pub fn parse(field: &str, level: Option<&str>, id: Option<String>) -> Result<Option<Scope>, FieldError> {
        match (level, id) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(FieldError::new(format!("{field}_id"), format!("given without {field}"))),
            (Some(level), id) => Ok(Some(Scope { level: ScopeLevel::parse(field, level)?, id })),
        }
    }
}

impl Default for Scope {
    fn default() -> Self {
        Scope::GLOBAL
    }
}

/// A memory to retain: its text, and any field it wants to set. Unset fields take the engine's
/// defaults (`settings.defaults`).
///
/// ```
/// use hindsight_types::{Kind, Memory};
/// let m = Memory::new("pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV")
///     .kind(Kind::Procedural)
///     .tags(["csv", "encoding"])
///     .importance(0.8);
/// assert_eq!(m.tags, ["csv", "encoding"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memory {
    /// Plain text, not markdown: one self-contained statement.
    pub content: String,
    /// Episodic, semantic or procedural.
    pub kind: Option<Kind>,
    /// The kind of task it applies to, e.g. `data-cleaning`; recall favours the same type.
    pub task_type: Option<String>,
    /// The task it came from, in a sentence.
    pub task_description: Option<String>,
    /// JSON text: tools used, parameters, samples.
    pub context: Option<String>,
    /// Free-form labels; recall can require them. `constraint`, `preference` and `transient`
    /// change how the memory ages.
    pub tags: Vec<String>,
    /// Global unless set.
    pub scope: Option<Scope>,
    /// The agent that wrote it.
    pub agent_id: Option<String>,
    /// 0..1: how much it matters.
    pub importance: Option<f32>,
    /// 0..1: how sure it is (default by source).
    pub confidence: Option<f32>,
    /// Who said it (default: agent inference).
    pub source: Option<Source>,
    /// For a failure: may it pass?
    pub failure_type: Option<FailureType>,
    /// When the remembered thing happened (default: now).
    pub occurred_at: Option<Timestamp>,
    /// After this it is no longer recalled.
    pub valid_until: Option<Timestamp>,
    /// Caller metadata, e.g. `("turn", "D3:12")`.
    pub metadata: Vec<(String, String)>,
    /// Store as given: skip the write filter, dedup, merge and conflict checks.
    pub force: bool,
    /// Valid beside any memory it contradicts: both are kept and flagged as conflicting.
    pub parallel: bool,
    /// The next of a sequence: it follows the item before it in the same call (a conversation's
    /// turns), and is also found by the words of that item.
    pub sequence: bool,
    /// A vector made by the bank's embedding model: the text is not embedded again.
    pub vector: Option<Vec<f32>>,
}

impl Memory {
    /// A memory with this text and every other field unset.
    pub fn new(content: impl Into<String>) -> Memory {
        Memory { content: content.into(), ..Memory::default() }
    }

    /// Sets the kind.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Sets the task type.
    pub fn task_type(mut self, task_type: impl Into<String>) -> Self {
        self.task_type = Some(task_type.into());
        self
    }

    /// Sets the task description.
    pub fn task_description(mut self, description: impl Into<String>) -> Self {
        self.task_description = Some(description.into());
        self
    }

    /// Sets the context (JSON text).
    pub fn context(mut self, json: impl Into<String>) -> Self {
        self.context = Some(json.into());
        self
    }

    /// Adds tags.
    pub fn tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tags: I) -> Self {
        self.tags.extend(tags.into_iter().map(Into::into));
        self
    }

    /// Sets the scope.
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Sets the agent id.
    pub fn agent_id(mut self, agent: impl Into<String>) -> Self {
        self.agent_id = Some(agent.into());
        self
    }

    /// Sets the importance (0..1).
    pub fn importance(mut self, importance: f32) -> Self {
        self.importance = Some(importance);
        self
    }

    /// Sets the confidence (0..1).
    pub fn confidence(mut self, confidence: f32) -> Self {
        self.confidence = Some(confidence);
        self
    }

    /// Sets the source.
    pub fn source(mut self, source: Source) -> Self {
        self.source = Some(source);
        self
    }

    /// Marks it as a failure of this type.
    pub fn failure_type(mut self, failure: FailureType) -> Self {
        self.failure_type = Some(failure);
        self
    }

    /// When the remembered thing happened.
    pub fn occurred_at(mut self, at: Timestamp) -> Self {
        self.occurred_at = Some(at);
        self
    }

    /// When it stops being recalled.
    pub fn valid_until(mut self, until: Timestamp) -> Self {
        self.valid_until = Some(until);
        self
    }

    /// Adds a metadata pair.
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// Stores it as given: no write filter, dedup, merge or conflict check.
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }

    /// Keeps it beside anything it contradicts.
    pub fn parallel(mut self) -> Self {
        self.parallel = true;
        self
    }

    /// Marks it as the next of a sequence: it follows the item before it in the same call.
    pub fn sequence(mut self) -> Self {
        self.sequence = true;
        self
    }

    /// Uses this vector (made by the bank's model) instead of embedding the text.
    pub fn vector(mut self, vector: Vec<f32>) -> Self {
        self.vector = Some(vector);
        self
    }

    /// One line of a `retain --file` JSONL file: a JSON object whose keys are the fields'
    /// names (`content` or `text`; `at` or `occurred_at`; `meta` or `metadata`; `-` or `_`),
    /// times in ISO 8601, `tags` a list or `"a,b"`, `context` an object or JSON text. A
    /// leading byte-order mark is ignored. The error names the field.
    pub fn from_json_line(line: &str) -> Result<Memory, FieldError> {
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
        let value: Value = serde_json::from_str(line).map_err(|e| {
            let what =
                if line.trim_start().starts_with('{') { "is not valid JSON" } else { "is not a JSON object" };
            FieldError::new("line", format!("{what}: {e}"))
        })?;
        Memory::from_json(&value)
    }

    /// The same from a parsed JSON value (an MCP tool's arguments, say).
    pub fn from_json(value: &Value) -> Result<Memory, FieldError> {
        let Value::Object(map) = value else {
            return Err(FieldError::new("line", format!("expected a JSON object, got {}", type_name(value))));
        };
        let mut fields = Fields { map, taken: Vec::new() };
        let content = match fields.take(&["content", "text"]) {
            Some((_, Value::String(s))) => s.clone(),
            Some((name, other)) => return Err(FieldError::new(name, expected("a string", other))),
            None => return Err(FieldError::new("content", "missing")),
        };
        let mut m = Memory::new(content);
        m.kind = fields.named::<Kind>(&["kind"])?;
        m.task_type = fields.string(&["task_type", "task-type"])?;
        m.task_description = fields.string(&["task_description", "task-description"])?;
        m.context = match fields.take(&["context"]) {
            None | Some((_, Value::Null)) => None,
            Some((_, Value::String(s))) => Some(s.clone()),
            Some((_, v)) => Some(v.to_string()),
        };
        m.tags = match fields.take(&["tags"]) {
            None | Some((_, Value::Null)) => Vec::new(),
            Some((_, Value::String(s))) => split_list(s),
            Some((name, Value::Array(items))) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(FieldError::new(format!("{name}[{i}]"), expected("a string", other))),
                })
                .collect::<Result<_, _>>()?,
            Some((name, other)) => {
                return Err(FieldError::new(name, expected("a list of strings or \"a,b\"", other)))
            }
        };
        let level = fields.string(&["scope"])?;
        let scope_id = fields.string(&["scope_id", "scope-id"])?;
        m.scope = Scope::parse("scope", level.as_deref(), scope_id)?;
        m.agent_id = fields.string(&["agent_id", "agent-id"])?;
        m.importance = fields.number(&["importance"])?;
        m.confidence = fields.number(&["confidence"])?;
        m.source = fields.named::<Source>(&["source"])?;
        m.failure_type = fields.named::<FailureType>(&["failure_type", "failure-type"])?;
        m.occurred_at = fields.time(&["at", "occurred_at", "occurred-at"])?;
        m.valid_until = fields.time(&["valid_until", "valid-until"])?;
        m.metadata = match fields.take(&["meta", "metadata"]) {
            None | Some((_, Value::Null)) => Vec::new(),
            Some((_, Value::Object(pairs))) => pairs
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => (k.clone(), s.clone()),
                    other => (k.clone(), other.to_string()),
                })
                .collect(),
            Some((name, other)) => {
                return Err(FieldError::new(name, expected("an object of strings", other)))
            }
        };
        m.force = fields.flag(&["force"])?;
        m.parallel = fields.flag(&["parallel"])?;
        m.sequence = fields.flag(&["sequence"])?;
        m.vector = match fields.take(&["vector"]) {
            None | Some((_, Value::Null)) => None,
            Some((name, Value::Array(items))) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| match v.as_f64() {
                        Some(x) if x.is_finite() => Ok(x as f32),
                        _ => Err(FieldError::new(format!("{name}[{i}]"), expected("a finite number", v))),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Some((name, other)) => return Err(FieldError::new(name, expected("a list of numbers", other))),
        };
        fields.finish()?;
        Ok(m)
    }
}

impl From<&str> for Memory {
    fn from(content: &str) -> Self {
        Memory::new(content)
    }
}

impl From<String> for Memory {
    fn from(content: String) -> Self {
        Memory::new(content)
    }
}

/// `"a, b,,c"` → `["a", "b", "c"]`.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn expected(what: &str, got: &Value) -> String {
    let shown: String = got.to_string().chars().take(60).collect();
    format!("expected {what}, got {} {shown}", type_name(got))
}

/// A JSON object's fields, taken one by one by any of their accepted names; what is left at the
/// end is an unknown field.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    taken: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    /// The value under the first of `names` present (an error if two are).
    fn take(&mut self, names: &[&'static str]) -> Option<(&'static str, &'a Value)> {
        let mut found = None;
        for name in names {
            if let Some((key, value)) = self.map.get_key_value(*name) {
                self.taken.push(key.as_str());
                found.get_or_insert((*name, value));
            }
        }
        found
    }

    fn string(&mut self, names: &[&'static str]) -> Result<Option<String>, FieldError> {
        match self.take(names) {
            None | Some((_, Value::Null)) => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s.clone())),
            Some((name, other)) => Err(FieldError::new(name, expected("a string", other))),
        }
    }

    fn number(&mut self, names: &[&'static str]) -> Result<Option<f32>, FieldError> {
        match self.take(names) {
            None | Some((_, Value::Null)) => Ok(None),
            Some((name, v)) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x as f32)),
                _ => Err(FieldError::new(name, expected("a number", v))),
            },
        }
    }

    fn flag(&mut self, names: &[&'static str]) -> Result<bool, FieldError> {
        match self.take(names) {
            None | Some((_, Value::Null)) => Ok(false),
            Some((_, Value::Bool(b))) => Ok(*b),
            Some((name, other)) => Err(FieldError::new(name, expected("true or false", other))),
        }
    }

    fn named<T: Named>(&mut self, names: &[&'static str]) -> Result<Option<T>, FieldError> {
        match self.string(names)? {
            None => Ok(None),
            Some(text) => T::parse(names[0], &text).map(Some),
        }
    }

    fn time(&mut self, names: &[&'static str]) -> Result<Option<Timestamp>, FieldError> {
        match self.take(names) {
            None | Some((_, Value::Null)) => Ok(None),
            Some((name, Value::String(s))) => parse_iso(name, s).map(Some),
            Some((name, Value::Number(n))) => match n.as_i64() {
                Some(ms) => Ok(Some(ms)),
                None => Err(FieldError::new(name, "a number of milliseconds must be a whole number")),
            },
            Some((name, other)) => Err(FieldError::new(name, expected("an ISO 8601 time", other))),
        }
    }

    fn finish(self) -> Result<(), FieldError> {
        match self.map.keys().find(|k| !self.taken.contains(&k.as_str())) {
            None => Ok(()),
            Some(unknown) => Err(FieldError::new(
                unknown.clone(),
                "unknown field; known: content (or text), kind, importance, confidence, source, task_type, \
                 task_description, context, tags, scope, scope_id, agent_id, failure_type, at, valid_until, \
                 meta, force, parallel, sequence, vector",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_take_every_field_under_its_accepted_names() {
        let m = Memory::from_json_line(
            "\u{feff}{\"text\":\"x\",\"tags\":\"a, b\",\"meta\":{\"turn\":\"D1:2\"},\"at\":\"2023-05-08\",\
             \"task-type\":\"coding\",\"kind\":\"semantic\",\"importance\":0.8,\"force\":true,\"context\":{\"tool\":\"psql\"}}",
        )
        .unwrap();
        assert_eq!(m.content, "x");
        assert_eq!(m.tags, vec!["a", "b"]);
        assert_eq!(m.metadata, vec![("turn".to_string(), "D1:2".to_string())]);
        assert_eq!(m.occurred_at, Some(1_683_504_000_000));
        assert_eq!((m.kind, m.task_type.as_deref(), m.force), (Some(Kind::Semantic), Some("coding"), true));
        assert_eq!(m.importance, Some(0.8));
        assert_eq!(m.context.as_deref(), Some(r#"{"tool":"psql"}"#));
    }

    #[test]
    fn bad_lines_name_the_field() {
        let field = |line: &str| Memory::from_json_line(line).unwrap_err().field;
        assert_eq!(field(r#"{"text":123}"#), "text");
        assert_eq!(field(r#"{"kind":"semantic"}"#), "content");
        assert_eq!(field(r#"{"text":"x","kind":"thought"}"#), "kind");
        assert_eq!(field(r#"{"text":"x","colour":"red"}"#), "colour");
        assert_eq!(field(r#"{"text":"x","importance":"high"}"#), "importance");
        assert_eq!(field(r#"{"text":"x","tags":[1]}"#), "tags[0]");
        assert_eq!(field(r#"{"text":"x","at":"yesterday"}"#), "at");
        assert_eq!(field(r#"{"text":"x","vector":[1,"a"]}"#), "vector[1]");
        assert_eq!(field(r#"{"text":"x","scope_id":"p1"}"#), "scope_id");
        assert_eq!(field("plain text"), "line");
        assert_eq!(field("[1,2]"), "line");
        let err = Memory::from_json_line(r#"{"text":"x","kind":"thought"}"#).unwrap_err();
        assert!(err.message.contains("episodic, semantic, procedural"), "{err}");
    }
}
