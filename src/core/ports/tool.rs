//! **API Boundary.** The tool port: something the model can call.
//!
//! A tool describes itself with a JSON Schema and executes with JSON arguments. Every outcome is
//! a [`ToolOutput`]: bad arguments, failures and even panics become error results the model can
//! read, never errors that end the turn.
//!
//! Most tools are [`TypedTool`]s: their arguments are a Rust type, and that one type is both the
//! schema the model sees (derived with schemars, field doc comments as descriptions) and the
//! parser their calls go through, so the two cannot drift apart. A blanket implementation makes
//! every typed tool a [`Tool`]. Tools whose schema comes from elsewhere (MCP servers) implement
//! [`Tool`] directly. Either way the schema is serialized once, when the [`ToolSpec`] is built,
//! and every request embeds those bytes.

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::core::audience::Audience;
use crate::core::authority::{Authority, Effects};
use crate::core::ports::approvals::ApprovalGate;
use crate::core::session::SessionId;

/// The definition sent to the model, serialized once when it is built: every request embeds
/// these bytes as they are, and the usage estimate takes their length, instead of escaping the
/// description and the schema again on every turn.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    name: String,
    description: String,
    /// `{"name":…,"description":…,"parameters":…}`.
    wire: Box<RawValue>,
    /// Where the schema starts in `wire` (it runs to the closing brace).
    parameters_at: usize,
}

/// The serialized shape of a [`ToolSpec`].
#[derive(Serialize)]
struct WireSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl ToolSpec {
    /// A definition: `name` (unique, `[a-zA-Z0-9_-]+`), `description` (what it does and when to
    /// use it: paid for on every turn, so short) and the JSON Schema of the arguments object.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: &Value,
    ) -> Self {
        let (name, description) = (name.into(), description.into());
        let shape = WireSpec {
            name: &name,
            description: &description,
            parameters,
        };
        let wire = serde_json::value::to_raw_value(&shape).unwrap_or_else(|error| {
            // A `Value` always serializes (string keys, finite numbers); this is never reached.
            tracing::error!(error = %error, "Tool schema could not be serialized.");
            RawValue::NULL.to_owned()
        });
        let parameters_at = wire
            .get()
            .find(r#""parameters":"#)
            .map_or(0, |at| at + r#""parameters":"#.len());
        Self {
            name,
            description,
            wire,
            parameters_at,
        }
    }

    /// The unique name the model calls the tool by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the tool does and when to use it.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the arguments object, serialized.
    pub fn parameters(&self) -> &str {
        let wire = self.wire.get();
        wire.get(self.parameters_at..wire.len().saturating_sub(1))
            .unwrap_or("null")
    }

    /// The length of the serialized definition, what a request spends on it.
    pub fn wire_len(&self) -> usize {
        self.wire.get().len()
    }
}

impl Serialize for ToolSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.wire.serialize(serializer)
    }
}

/// A [`ToolSpec`] whose schema was derived from the argument type `A`: a typed tool can only
/// offer the schema of the type its calls are parsed into.
#[derive(Debug)]
pub struct TypedSpec<A> {
    spec: ToolSpec,
    arguments: PhantomData<fn() -> A>,
}

impl<A: JsonSchema> TypedSpec<A> {
    /// The definition of a tool taking `A`.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::edited(name, description, |_| {})
    }

    /// The definition of a tool taking `A`, with its derived schema changed by `edit` before it
    /// is serialized: for what only the running configuration knows (such as the names a
    /// string may take). The edit may narrow the schema, never widen it past what `A` accepts.
    pub fn edited(
        name: impl Into<String>,
        description: impl Into<String>,
        edit: impl FnOnce(&mut Value),
    ) -> Self {
        let mut parameters = parameters_schema::<A>();
        edit(&mut parameters);
        Self {
            spec: ToolSpec::new(name, description, &parameters),
            arguments: PhantomData,
        }
    }

    /// The definition sent to the model.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

/// The JSON Schema of the arguments object `A`, as models are shown it: every subschema inline,
/// no `$schema`, `title` or `additionalProperties`, optional fields simply not required (some OpenAI-compatible servers
/// refuse `"type": ["string", "null"]`), and no integer `format` (`uint64` tells a model
/// nothing that `minimum` does not, and costs prompt on every turn).
pub fn parameters_schema<A: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft07()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .with_transform(RecursiveTransform(for_models as fn(&mut Schema)));
    let mut schema = settings.into_generator().into_root_schema_for::<A>();
    // The type's own doc comment describes it to Rust readers; the tool's description is the
    // model's. `additionalProperties: false` (from `deny_unknown_fields`) is left out: the
    // parser refuses an unknown field with an error naming it anyway, and the key cost 31
    // characters of every tool on every turn (#36: the fresh turn's prompt ≤ 7,000).
    for key in ["title", "description", "additionalProperties"] {
        schema.remove(key);
    }
    let mut parameters = schema.to_value();
    if let Value::Object(root) = &mut parameters {
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    parameters
}

/// One subschema as [`parameters_schema`] wants it.
fn for_models(schema: &mut Schema) {
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|kind| kind != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            schema.insert("type".to_owned(), only);
        }
    }
    if schema.get("type").and_then(Value::as_str) == Some("integer") {
        schema.remove("format");
    }
}

/// The result of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Whether the text comes from outside (a web page, a search engine, an MCP server, a
    /// stranger's file): the agent loop then fences it as untrusted data (`core::untrusted`).
    pub untrusted: bool,
    /// Images the result shows, as the paths they were read at: a model that reads images
    /// gets them beside the result (Chat Completions take image parts only from the user, so
    /// the LLM adapter adds them in a message of their own after the results); the history
    /// keeps the paths, never the bytes.
    pub images: Vec<String>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            untrusted: false,
            images: Vec::new(),
        }
    }

    /// A failed result; the text is prefixed with `Error: ` unless it already is.
    pub fn error(content: impl Into<String>) -> Self {
        let content = content.into();
        let content = if content.starts_with("Error") {
            content
        } else {
            format!("Error: {content}")
        };
        Self {
            content,
            is_error: true,
            untrusted: false,
            images: Vec::new(),
        }
    }

    /// This result, showing the image saved at `path` (see [`ToolOutput::images`]).
    pub fn with_image(mut self, path: impl Into<String>) -> Self {
        self.images.push(path.into());
        self
    }

    /// This result, marked as text from outside (see [`ToolOutput::untrusted`]).
    pub fn from_outside(mut self) -> Self {
        self.untrusted = true;
        self
    }
}

/// What a tool knows about the turn that calls it.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session whose turn this is.
    pub session: SessionId,
    /// The channel's routing data for the turn (room, thread, mail headers).
    pub metadata: serde_json::Map<String, Value>,
    /// Where the session's unconsolidated tail starts (a byte offset in its history). Those
    /// messages, and the summary, are already in this turn's prompt, so a history search
    /// leaves them out. `None` when the call comes from outside a turn.
    pub prompt_tail: Option<u64>,
    /// The turn's approval gate: a tool about to do something the owner must approve waits
    /// on it. `None` outside a turn, where nothing that needs approval runs.
    pub approvals: Option<Arc<dyn ApprovalGate>>,
    /// Who takes part in the turn: a shared turn's tools reach only its own session.
    pub audience: Audience,
    /// Whether the owner asked: only then may tools change what lasts (instruction files,
    /// skills, anything the owner's turns read); see [`Tool::effects`].
    pub authority: Authority,
}

/// The context the unit tests call tools with, built in one place (the struct was written out
/// in every tool's tests): a call the owner made outside a turn, in `cli:test`, to the default
/// audience, with no routing data, prompt tail or approval gate; each `with_` changes one part.
#[cfg(test)]
impl ToolContext {
    /// The owner's call in `cli:test` (see the impl's note).
    pub fn for_test() -> Self {
        Self {
            session: SessionId::new("cli", "test").unwrap(),
            metadata: Map::new(),
            prompt_tail: None,
            approvals: None,
            audience: Audience::default(),
            authority: Authority::Owner,
        }
    }

    /// In `session`.
    pub fn with_session(self, session: SessionId) -> Self {
        Self { session, ..self }
    }

    /// To `audience`.
    pub fn with_audience(self, audience: Audience) -> Self {
        Self { audience, ..self }
    }

    /// Asked with `authority`.
    pub fn with_authority(self, authority: Authority) -> Self {
        Self { authority, ..self }
    }

    /// With the turn's tail starting at `prompt_tail`.
    pub fn with_prompt_tail(self, prompt_tail: Option<u64>) -> Self {
        Self {
            prompt_tail,
            ..self
        }
    }
}

/// Something the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The definition offered to the model.
    fn spec(&self) -> &ToolSpec;

    /// What the tool does past the turn. Required, with no default: whether a turn may
    /// offer and run the tool is decided from this declaration alone
    /// ([`Effects::refusal`]), so a tool that does not declare cannot be registered.
    fn effects(&self) -> Effects;

    /// Runs the tool. Must not panic on bad input: validate `arguments` and return
    /// [`ToolOutput::error`] with a message that says what was wrong ([`TypedTool`]s get this
    /// from the blanket implementation).
    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput;
}

/// A tool whose arguments are the Rust type [`TypedTool::Arguments`]: the one place that type
/// is declared is both its schema and its parser.
///
/// The blanket [`Tool`] implementation parses every call with [`parse_arguments`] and turns a
/// mismatch into an error result, so [`TypedTool::run`] only ever sees well-formed arguments.
#[async_trait]
pub trait TypedTool: Send + Sync {
    /// The arguments object. Declare it with `#[serde(deny_unknown_fields)]` (the parser then
    /// refuses unknown fields by name) and a `///` line on each field, which becomes the
    /// field's description for the model.
    type Arguments: DeserializeOwned + JsonSchema + Send;

    /// The definition offered to the model, built once with [`TypedSpec::new`].
    fn definition(&self) -> &TypedSpec<Self::Arguments>;

    /// See [`Tool::effects`].
    fn effects(&self) -> Effects;

    /// Runs the tool on parsed arguments. Must not panic: what the type cannot check (empty
    /// strings, ranges, paths) is checked here and refused with [`ToolOutput::error`].
    async fn run(&self, arguments: Self::Arguments, context: &ToolContext) -> ToolOutput;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn spec(&self) -> &ToolSpec {
        self.definition().spec()
    }

    fn effects(&self) -> Effects {
        TypedTool::effects(self)
    }

    async fn call(&self, arguments: Value, context: &ToolContext) -> ToolOutput {
        match parse_arguments::<T::Arguments>(self.spec().name(), arguments) {
            Ok(arguments) => self.run(arguments, context).await,
            Err(output) => output,
        }
    }
}

/// Parses `arguments` into `T`, turning a mismatch into a clear error result.
///
/// Tools declare their argument struct with `#[serde(deny_unknown_fields)]`, so this is the
/// schema check: missing fields, wrong types and unknown fields are all named.
pub fn parse_arguments<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, ToolOutput> {
    let arguments = if arguments.is_null() {
        Value::Object(Default::default())
    } else {
        arguments
    };
    if let Value::String(raw) = &arguments {
        let what = if serde_json::from_str::<Value>(raw).is_ok() {
            "not a JSON object"
        } else {
            "not valid JSON"
        };
        return Err(ToolOutput::error(format!(
            "Error: arguments for {tool} are {what}: {}",
            raw.chars().take(200).collect::<String>()
        )));
    }
    // serde reads a struct from an array too (fields by position): `[""]` would pass as a
    // call of a tool whose first field is a string. Arguments are an object, by name. See: #7
    let kind = match &arguments {
        Value::Object(_) => None,
        Value::Array(_) => Some("an array"),
        Value::Number(_) => Some("a number"),
        Value::Bool(_) => Some("a boolean"),
        Value::Null | Value::String(_) => Some("not an object"),
    };
    if let Some(kind) = kind {
        return Err(ToolOutput::error(format!(
            "Error: arguments for {tool} must be a JSON object with named fields, not {kind}"
        )));
    }
    serde_json::from_value(arguments)
        .map_err(|error| ToolOutput::error(format!("Error: invalid arguments for {tool}: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Arguments {
        #[allow(dead_code)]
        path: String,
    }

    fn error_of(arguments: Value) -> String {
        parse_arguments::<Arguments>("list_files", arguments)
            .unwrap_err()
            .content
    }

    /// Every rule of `parameters_schema` on one type.
    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        /// The path.
        path: String,
        /// At most this many.
        #[schemars(range(min = 1, max = 9), extend("default" = 5))]
        limit: Option<u64>,
        #[schemars(skip)]
        legacy: Option<u32>,
        flag: Option<bool>,
    }

    #[test]
    fn derived_schemas_are_what_models_are_shown() {
        assert_eq!(
            parameters_schema::<Sample>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The path."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 9, "default": 5, "description": "At most this many."},
                    "flag": {"type": "boolean"}
                },
                "required": ["path"]
            })
        );
        #[derive(serde::Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        struct Nothing {}
        assert_eq!(
            parameters_schema::<Nothing>(),
            json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn a_spec_serializes_its_schema_once_and_embeds_it() {
        let spec = TypedSpec::<Sample>::edited("sample", "Samples.", |parameters| {
            parameters["properties"]["path"]["enum"] = json!(["a", "b"]);
        });
        let spec = spec.spec();
        assert_eq!(spec.name(), "sample");
        let parameters: Value = serde_json::from_str(spec.parameters()).unwrap();
        assert_eq!(parameters["properties"]["path"]["enum"], json!(["a", "b"]));
        let sent = serde_json::to_value(spec).unwrap();
        assert_eq!(
            sent,
            json!({"name": "sample", "description": "Samples.", "parameters": parameters})
        );
        assert_eq!(spec.wire_len(), serde_json::to_string(&sent).unwrap().len());
    }

    /// The schema is found in the stored bytes even when the description quotes its key and the
    /// schema has a property of that name.
    #[test]
    fn a_spec_finds_its_schema_past_a_quoting_description() {
        let schema = json!({"type": "object", "properties": {"parameters": {"type": "string"}}});
        let spec = ToolSpec::new("odd", r#"Takes "parameters": text."#, &schema);
        let parameters: Value = serde_json::from_str(spec.parameters()).unwrap();
        assert_eq!(parameters, schema);
        assert_eq!(spec.description(), r#"Takes "parameters": text."#);
    }

    #[test]
    fn named_fields_parse() {
        assert_eq!(
            parse_arguments::<Arguments>("t", json!({"path": "a"}))
                .unwrap()
                .path,
            "a"
        );
    }

    /// Found by the `tool_arguments` fuzz target (seed `positional.json`): `[""]` was accepted
    /// as `{"path": ""}`, because serde reads a struct from an array by position.
    #[test]
    fn issue_7_positional_and_scalar_arguments_are_refused() {
        assert!(error_of(json!([""])).contains("not an array"));
        assert!(error_of(json!(3)).contains("not a number"));
        assert!(error_of(json!(true)).contains("not a boolean"));
        assert!(error_of(json!("{\"path\":1}")).contains("not a JSON object"));
        assert!(error_of(json!("{broken")).contains("not valid JSON"));
        assert!(error_of(json!({"path": "a", "x": 1})).contains("unknown field"));
    }
}
