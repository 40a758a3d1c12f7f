//! Fuzzes tool-argument validation: the arguments text a model sends with a tool call, through
//! `squidbot::llm::parse_tool_arguments` (what history stores and a tool receives),
//! `squidbot::llm::tool_arguments_text` (what goes back to the provider), the workspace path
//! guard and the real `read_file` and `list_files` tools over a scratch workspace.
//!
//! Invariants checked on every input, beyond "never panics" (the tools are called directly, not
//! through the registry's panic catcher, so a panic in a tool is a crash here):
//! - valid JSON is kept as parsed (but `null`, like nothing, is `{}`); anything else is kept
//!   verbatim as a string;
//! - the text sent back to the provider is the model's own text or the same JSON value;
//! - validation never accepts what it cannot parse: arguments that are not a JSON object (or
//!   nothing) are always an error result, and a tool that accepts a call had an object;
//! - a `path` the guard accepts resolves inside the workspace (it is restricted).
//!
//! Found by this target and fixed: a number that is not exactly representable, e.g.
//! `33333333333333333333333333333333` (seed `float_roundtrip.json`), parsed to a slightly
//! different f64 than its printed form parsed back to, because serde_json without its
//! `float_roundtrip` feature rounds inexactly; the main crate now enables that feature
//! (regression test `issue_7_a_long_number_argument_round_trips_exactly` in `llm::stream`).
//! And: `null` was stored as null but sent back as `{}` (seed `null.json`); `null` now means no
//! arguments on both sides (regression test `issue_7_null_arguments_mean_none_in_history_and_back`).
//! And: `[""]` was accepted by `list_files` as `{"path": ""}` (serde reads a struct from an
//! array by position); arguments must now be an object (seed `positional.json`, regression test
//! `issue_7_positional_and_scalar_arguments_are_refused` in `core::ports::tool`).
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use squidbot::core::ports::tool::{Tool, ToolContext};
use squidbot::core::session::SessionId;
use squidbot::llm::{parse_tool_arguments, tool_arguments_text};
use squidbot::tools::{ListFilesTool, ReadFileTool};
use squidbot::workspace::WorkspaceGuard;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    guard: Arc<WorkspaceGuard>,
    root: PathBuf,
    tools: Vec<Arc<dyn Tool>>,
    context: ToolContext,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("notes")).expect("mkdir");
        std::fs::write(dir.path().join("notes/a.md"), "line one\nline two\n").expect("write");
        std::fs::write(dir.path().join("MEMORY.md"), "- likes tea\n").expect("write");
        let guard = Arc::new(WorkspaceGuard::new(dir.path(), true, &[]).expect("guard"));
        let tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(ReadFileTool::new(guard.clone())),
            Arc::new(ListFilesTool::new(guard.clone())),
        ];
        Fixture {
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
            root: guard.root().to_owned(),
            guard,
            tools,
            context: ToolContext {
                session: SessionId::new("fuzz", "tool-arguments").expect("session id"),
                metadata: Default::default(),
                prompt_tail: None,
                approvals: None,
                audience: Default::default(),
                authority: squidbot::core::authority::Authority::Owner,
            },
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return; // Arguments arrive as a JSON string field: always UTF-8.
    };
    let fixture = fixture();

    let arguments = parse_tool_arguments(raw);
    let strict = serde_json::from_str::<Value>(raw);
    if raw.trim().is_empty() || matches!(strict, Ok(Value::Null)) {
        assert_eq!(arguments, Value::Object(Default::default()), "no arguments is {{}}");
    } else if let Ok(Value::String(_)) | Err(_) = &strict {
        assert_eq!(
            arguments,
            Value::String(raw.to_owned()),
            "not kept verbatim"
        );
    } else if let Ok(value) = &strict {
        assert_eq!(&arguments, value, "valid JSON changed");
    }

    let sent_back = tool_arguments_text(&arguments);
    match &arguments {
        Value::String(text) => assert_eq!(&sent_back, text, "raw arguments not sent back as is"),
        value => assert_eq!(
            &serde_json::from_str::<Value>(&sent_back).expect("sent-back text is JSON"),
            value
        ),
    }

    if let Some(Value::String(path)) = arguments.get("path") {
        for resolved in [
            fixture.guard.resolve_for_read(path),
            fixture.guard.resolve_for_write(path),
        ]
        .into_iter()
        .flatten()
        {
            assert!(
                resolved.starts_with(&fixture.root),
                "{path:?} resolved outside the workspace: {resolved:?}"
            );
        }
    }

    let is_object = matches!(arguments, Value::Object(_) | Value::Null);
    for tool in &fixture.tools {
        let output = fixture
            .runtime
            .block_on(tool.call(arguments.clone(), &fixture.context));
        if !is_object {
            assert!(output.is_error, "{} accepted {arguments}", tool.spec().name());
        }
        if output.is_error {
            assert!(output.content.starts_with("Error"), "{}", output.content);
        }
    }
});
