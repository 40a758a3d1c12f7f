//! Every tool's schema against its argument type: whatever the schema the model is shown
//! accepts, the tool's parser must accept too, and the examples written here (by field name, so
//! a renamed field shows) must get the same verdict from both.
//!
//! The schemas are derived from the argument types, so they follow the types by construction;
//! these tests guard what is written by hand around them (`range`, `default`, `skip`, the spawn
//! tool's profile edit) and the generator's settings. The validator is a small one for the
//! subset of JSON Schema that `parameters_schema` emits: it refuses any keyword it does not know,
//! so a schema that grows a new keyword fails here until the validator learns it.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

#[cfg(feature = "matrix")]
use crate::channels::matrix::media::SendFileTool;
use crate::config::{SpawnConfig, SpawnProfile};
use crate::core::memory_manager::MemorySettings;
use crate::core::ports::clock::{Clock, SystemClock};
use crate::core::ports::llm::LlmClient;
use crate::core::ports::tool::{
    Tool, ToolContext, ToolOutput, TypedSpec, TypedTool, parse_arguments,
};
use crate::core::session::SessionId;
use crate::core::session_locks::SessionLocks;
use crate::core::tool_registry::ToolRegistry;
use crate::cron::store::CronJobs;
use crate::cron::tools::{CronAddTool, CronListTool, CronRemoveTool, CronSetEnabledTool};
use crate::llm::{Endpoint, OpenAiCompatLlm, Timeouts};
use crate::storage::history_index::HistoryIndex;
use crate::storage::jsonl_store::JsonlStore;
use crate::storage::memory_file::MemoryFile;
use crate::tools::spawn::{SpawnHub, SpawnLimits, SubAgentParts};
use crate::tools::web_search::SearchProvider;
use crate::tools::{
    EditFileTool, FetchUrlTool, ListFilesTool, MemoryWriteTool, ReadFileTool, SearchHistoryTool,
    ShellTool, SpawnAwaitTool, SpawnTool, WebSearchTool, WriteFileTool,
};
use crate::workspace::WorkspaceGuard;

/// What both sides must say about a hand-written example.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The schema and the parser accept it.
    Valid,
    /// The schema and the parser refuse it.
    Invalid,
    /// The parser accepts it, the schema does not offer it (`search_history`'s `days`, a value
    /// the tool refuses itself): the schema may be narrower than the type, never wider.
    Unadvertised,
    /// The schema refuses it, whatever the parser says (`null` for an optional field).
    NotOffered,
}

use Verdict::{Invalid, NotOffered, Unadvertised, Valid};

/// The problems found checking `tool`: generated cases from its schema, then `examples`.
fn check<T: TypedTool>(tool: &T, examples: &[(Value, Verdict)]) -> Vec<String> {
    let name = tool.spec().name().to_owned();
    let schema: Value = serde_json::from_str(tool.spec().parameters()).unwrap();
    let parses = |arguments: &Value| parse_arguments::<T::Arguments>(&name, arguments.clone());
    let mut problems = Vec::new();
    let mut expect = |arguments: &Value, verdict: Verdict| {
        let by_schema = validate(&schema, arguments);
        let by_parser = parses(arguments)
            .map(|_| ())
            .map_err(|output| output.content);
        // Whatever the schema accepts, the parser must accept.
        let sound = by_schema.is_err() || by_parser.is_ok();
        let agrees = match verdict {
            Valid => by_schema.is_ok() && by_parser.is_ok(),
            Invalid => by_schema.is_err() && by_parser.is_err(),
            Unadvertised => by_schema.is_err() && by_parser.is_ok(),
            NotOffered => by_schema.is_err(),
        };
        if !(sound && agrees) {
            problems.push(format!(
                "{name}: {arguments} should be {verdict:?}; schema says {by_schema:?}, parser says {by_parser:?}"
            ));
        }
    };

    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let minimal: Map<String, Value> = required
        .iter()
        .map(|field| ((*field).to_owned(), sample(&properties[*field])))
        .collect();
    let full: Map<String, Value> = properties
        .iter()
        .map(|(field, property)| (field.clone(), sample(property)))
        .collect();
    expect(&Value::Object(minimal.clone()), Valid);
    expect(&Value::Object(full.clone()), Valid);
    for field in &required {
        let mut missing = minimal.clone();
        missing.remove(*field);
        expect(&Value::Object(missing), Invalid);
    }
    for (field, property) in &properties {
        let mut wrong = full.clone();
        wrong.insert(field.clone(), wrong_type(property));
        expect(&Value::Object(wrong), Invalid);
        for bound in ["minimum", "maximum"] {
            if let Some(limit) = property.get(bound) {
                let mut at_limit = full.clone();
                at_limit.insert(field.clone(), limit.clone());
                expect(&Value::Object(at_limit), Valid);
            }
        }
        if !required.contains(&field.as_str()) {
            let mut null = minimal.clone();
            null.insert(field.clone(), Value::Null);
            expect(&Value::Object(null), NotOffered);
        }
    }
    let mut unknown = full;
    unknown.insert("surely_not_a_field".to_owned(), json!(1));
    expect(&Value::Object(unknown), Invalid);
    expect(&json!([]), Invalid);
    for (arguments, verdict) in examples {
        expect(arguments, *verdict);
    }
    problems
}

/// A value the property's schema accepts.
fn sample(property: &Value) -> Value {
    if let Some(first) = property["enum"]
        .as_array()
        .and_then(|values| values.first())
    {
        return first.clone();
    }
    match property["type"].as_str() {
        Some("string") => json!("x"),
        Some("integer") => property.get("minimum").cloned().unwrap_or(json!(1)),
        Some("boolean") => json!(true),
        other => panic!("no sample for type {other:?} in {property}"),
    }
}

/// A value of another type than the property's.
fn wrong_type(property: &Value) -> Value {
    match property["type"].as_str() {
        Some("string") => json!(7),
        _ => json!("7"),
    }
}

/// Checks `value` against `schema`, for the keywords `parameters_schema` emits; panics on any
/// other keyword, so nothing is waved through unread.
fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        panic!("not a schema object: {schema}");
    };
    for keyword in schema.keys() {
        let known = [
            "type",
            "properties",
            "required",
            "additionalProperties",
            "enum",
            "minimum",
            "maximum",
            "description",
            "default",
        ];
        assert!(
            known.contains(&keyword.as_str()),
            "the test validator does not know {keyword:?}"
        );
    }
    if let Some(kind) = schema.get("type") {
        let kind = kind.as_str().expect("one type per schema");
        let matches = match kind {
            "object" => value.is_object(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "boolean" => value.is_boolean(),
            other => panic!("the test validator does not know type {other:?}"),
        };
        if !matches {
            return Err(format!("{value} is not of type {kind}"));
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(value)
    {
        return Err(format!("{value} is not one of {values:?}"));
    }
    if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|n| n < minimum)
    {
        return Err(format!("{value} is below {minimum}"));
    }
    if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|n| n > maximum)
    {
        return Err(format!("{value} is above {maximum}"));
    }
    let Some(object) = value.as_object() else {
        return Ok(());
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    for field in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = field.as_str().unwrap_or_default();
        if !object.contains_key(field) {
            return Err(format!("missing required {field:?}"));
        }
    }
    for (field, item) in object {
        match properties.and_then(|properties| properties.get(field)) {
            Some(property) => validate(property, item).map_err(|e| format!("{field}: {e}"))?,
            // Typed tools refuse unknown fields (`deny_unknown_fields`) though their schema no
            // longer says so; MCP schemas that allow them say `additionalProperties`.
            None if schema.get("additionalProperties") != Some(&json!(true)) => {
                return Err(format!("unknown field {field:?}"));
            }
            None => {}
        }
    }
    Ok(())
}

/// A spawn hub with one profile, so the `spawn` schema has its `profile` enum.
fn hub(home: &Path) -> Arc<SpawnHub> {
    let mut config = SpawnConfig {
        enabled: true,
        ..SpawnConfig::default()
    };
    let profile = SpawnProfile {
        system_prompt: "Finds sources.".to_owned(),
        ..SpawnProfile::default()
    };
    config.profiles.insert("researcher".to_owned(), profile);
    let parts = SubAgentParts {
        // Never called: building the schema needs a hub, not a model.
        llm: Arc::new(OpenAiCompatLlm::new(
            reqwest::Client::new(),
            Endpoint::new("none", "none", "http://127.0.0.1:9"),
            Timeouts::default(),
        )),
        tools: ToolRegistry::new(),
        history: Arc::new(JsonlStore::new(home)),
        memory: Arc::new(MemoryFile::new(home)),
        clock: Arc::new(SystemClock),
        settings: MemorySettings::default(),
        workspace: home.to_owned(),
        locks: Arc::new(SessionLocks::new()),
    };
    let no_pools = |_: &str| Err::<Arc<dyn LlmClient>, _>("no pools");
    Arc::new(SpawnHub::new(&config, parts, SpawnLimits::default(), no_pools).unwrap())
}

/// The short type name of `T` (`ShellTool`), as `impl TypedTool for` writes it.
fn type_name<T>(_: &T) -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}

#[tokio::test]
async fn every_schema_accepts_only_what_its_arguments_type_accepts() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let cron = CronJobs::new(home);
    let guard = Arc::new(WorkspaceGuard::new(home, true, &[]).unwrap());
    let session = SessionId::cli_local();
    let mut problems = Vec::new();
    let mut checked = Vec::new();
    macro_rules! check {
        ($tool:expr, [$($example:expr),* $(,)?]) => {{
            let tool = $tool;
            checked.push(type_name(&tool));
            problems.extend(check(&tool, &[$($example),*]));
        }};
    }

    check!(
        ShellTool::new(home, 60),
        [
            (json!({"command": "ls", "timeout": 600}), Valid),
            (json!({"command": "ls", "timeout": 601}), Unadvertised),
            (json!({"cmd": "ls"}), Invalid),
        ]
    );
    check!(
        ReadFileTool::new(guard.clone()),
        [
            (json!({"path": "a", "offset": 2, "limit": 3}), Valid),
            (json!({"path": "a", "offset": 0}), Unadvertised),
            (json!({"path": "a", "offset": -1}), Invalid),
            (json!({"file": "a"}), Invalid),
        ]
    );
    check!(
        WriteFileTool::new(guard.clone()),
        [
            (json!({"path": "a", "content": ""}), Valid),
            (json!({"path": "a"}), Invalid),
        ]
    );
    check!(
        EditFileTool::new(guard.clone()),
        [
            (json!({"path": "a", "old_text": "x", "new_text": ""}), Valid),
            (json!({"path": "a", "old": "x", "new": "y"}), Invalid),
        ]
    );
    check!(
        ListFilesTool::new(guard.clone()),
        [(json!({}), Valid), (json!({"path": "notes"}), Valid)]
    );
    check!(
        CronListTool::new(cron.clone(), clock.clone()),
        [(json!({}), Valid)]
    );
    check!(
        CronRemoveTool::new(cron.clone()),
        [
            (json!({"job_id": "j1"}), Valid),
            (json!({"id": "j1"}), Invalid)
        ]
    );
    check!(
        CronSetEnabledTool::new(cron.clone(), clock.clone()),
        [
            (json!({"job_id": "j1", "enabled": false}), Valid),
            (json!({"job_id": "j1", "enabled": "no"}), Invalid),
        ]
    );
    check!(
        CronAddTool::new(
            cron,
            Arc::new(crate::channels::Routes::new()),
            clock.clone(),
            session.clone(),
            Map::new(),
            "owner"
        ),
        [
            (
                json!({"name": "n", "message": "m", "schedule": "every 60", "timezone": "UTC",
                       "channel": "email:a@b.c", "enabled": false}),
                Valid
            ),
            (
                json!({"name": "n", "prompt": "m", "schedule": "every 60"}),
                Invalid
            ),
        ]
    );
    check!(
        FetchUrlTool::new(),
        [
            (
                json!({"url": "https://example.org", "max_chars": 100000, "format": "html"}),
                Valid
            ),
            // Accepted but kept out of every turn's prompt.
            (
                json!({"url": "https://example.org", "timeout_seconds": 60, "max_bytes": 1}),
                Unadvertised
            ),
            (
                json!({"url": "https://example.org", "format": "markdown"}),
                Invalid
            ),
            (
                json!({"url": "https://example.org", "timeout_seconds": 0}),
                Unadvertised
            ),
        ]
    );
    let provider = SearchProvider::DuckDuckGo {
        url: "http://127.0.0.1:9".to_owned(),
    };
    check!(
        WebSearchTool::new(provider).unwrap(),
        [
            (json!({"query": "rust", "max_results": 10}), Valid),
            (json!({"query": "rust", "max_results": 11}), Unadvertised),
            (json!({"q": "rust"}), Invalid),
        ]
    );
    let index = Arc::new(HistoryIndex::open(home).unwrap());
    check!(
        SearchHistoryTool::new(index, clock),
        [
            (
                json!({"query": "violin", "max_results": 50, "after": "2026-03-01",
                       "before": "2026-03-05", "session": "matrix:!r:x"}),
                Valid
            ),
            (json!({"query": "violin", "days": 7}), Unadvertised),
            (json!({"query": "violin", "since": "2026-03-01"}), Invalid),
        ]
    );
    let hub = hub(home);
    check!(
        SpawnTool::new(hub.clone()),
        [
            (
                json!({"task": "t", "profile": "researcher", "context": "c",
                       "system_prompt": "s", "tools": "shell"}),
                Valid
            ),
            (json!({"task": "t", "profile": "poet"}), Unadvertised),
            (json!({"job": "t"}), Invalid),
        ]
    );
    check!(
        SpawnAwaitTool::new(hub),
        [
            (json!({"job_ids": "*"}), Valid),
            (json!({"ids": "*"}), Invalid)
        ]
    );
    check!(
        MemoryWriteTool::new(Arc::new(MemoryFile::new(home)), session),
        [
            (json!({"content": "- likes tea"}), Valid),
            (json!({"text": "x"}), Invalid)
        ]
    );
    #[cfg(feature = "matrix")]
    check!(
        SendFileTool::new(Arc::new(std::sync::RwLock::new(None)), home.to_owned()),
        [
            (json!({"path": "a.png"}), Valid),
            (json!({"file": "a.png"}), Invalid)
        ]
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Every typed tool in the source is checked above, and every other tool is an MCP tool
    // (whose schema its server gives).
    let mut typed = Vec::new();
    let mut untyped = Vec::new();
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    // A channel left out of this build (a cargo feature) has no tools in it.
    let built = |file: &&std::path::PathBuf| {
        let path = file.to_string_lossy();
        (cfg!(feature = "matrix") || !path.contains("src/channels/matrix/"))
            && (cfg!(feature = "email") || !path.contains("src/channels/email/"))
    };
    for file in files
        .iter()
        .filter(|file| !file.ends_with("src/tools/tests.rs"))
        .filter(built)
    {
        let text = std::fs::read_to_string(file).unwrap();
        // A unit test's stand-in tool (the tool set's tests) is no tool squidbot offers.
        let text = text
            .split_once("#[cfg(test)]\nmod tests {")
            .map_or(text.as_str(), |(code, _)| code);
        for (marker, found) in [
            ("impl TypedTool for ", &mut typed),
            ("impl Tool for ", &mut untyped),
        ] {
            for (at, _) in text.match_indices(marker) {
                let rest = &text[at + marker.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.push(name);
            }
        }
    }
    typed.sort();
    checked.sort();
    assert_eq!(typed, checked, "typed tools in src/ vs. tools checked here");
    let untyped: Vec<&str> = untyped
        .iter()
        .map(String::as_str)
        .filter(|name| *name != "McpTool")
        .collect();
    assert!(
        untyped.is_empty(),
        "tools not typed (only MCP tools may be): {untyped:?}"
    );
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A tool whose schema says more than its type: the check must catch it.
struct Wide(TypedSpec<Narrow>);

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Narrow {
    #[allow(dead_code)]
    path: String,
}

#[async_trait]
impl TypedTool for Wide {
    type Arguments = Narrow;

    fn definition(&self) -> &TypedSpec<Narrow> {
        &self.0
    }

    fn effects(&self) -> crate::core::authority::Effects {
        crate::core::authority::Effects::NONE
    }

    async fn run(&self, _arguments: Narrow, _context: &ToolContext) -> ToolOutput {
        ToolOutput::ok("")
    }
}

#[test]
fn the_check_catches_a_wider_schema_and_a_renamed_field() {
    let honest = Wide(TypedSpec::new("honest", ""));
    assert_eq!(
        check(&honest, &[(json!({"path": "a"}), Valid)]),
        Vec::<String>::new()
    );
    // The struct's field is `path`; an example (or a model) using the old name `file` fails.
    assert_eq!(check(&honest, &[(json!({"file": "a"}), Valid)]).len(), 1);
    // A schema edited to offer a field the type does not have.
    let wide = Wide(TypedSpec::edited("wide", "", |parameters| {
        parameters["properties"]["file"] = json!({"type": "string"});
    }));
    assert!(!check(&wide, &[]).is_empty());
    // A schema that no longer requires a field the type requires.
    let unbounded = Wide(TypedSpec::edited("unbounded", "", |parameters| {
        parameters["required"] = json!([]);
    }));
    assert!(!check(&unbounded, &[]).is_empty());
}

#[test]
fn the_validator_catches_a_schema_wider_than_its_type() {
    // A schema that advertises a field the type does not have: the check must say so.
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}},
                        "additionalProperties": false});
    assert!(validate(&schema, &json!({"path": "a"})).is_ok());
    assert!(validate(&schema, &json!({"file": "a"})).is_err());
    assert!(validate(&schema, &json!({"path": 1})).is_err());
    let ranged = json!({"type": "integer", "minimum": 1, "maximum": 3});
    assert!(validate(&ranged, &json!(0)).is_err());
    assert!(validate(&ranged, &json!(4)).is_err());
    assert!(validate(&ranged, &json!(2)).is_ok());
    assert!(validate(&json!({"enum": ["a"]}), &json!("b")).is_err());
}
