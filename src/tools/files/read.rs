//! `read_file`: the UTF-8 text of a file, by lines, capped at [`READ_CAP`](super::READ_CAP).
//!
//! The file is streamed line by line, so a huge file costs only what is returned. A file with a
//! NUL byte or invalid UTF-8 is refused as binary. When the cap or `limit` stops the read, a
//! note says which lines were shown and which `offset` continues. An image (PNG, JPEG, GIF,
//! WebP, by its bytes) is named instead and shown to a model that reads images.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{READ_CAP, blocking, io_failure};
use crate::core::authority::{Effect, Effects};
use crate::core::message::image_type;
use crate::core::ports::tool::{ToolContext, ToolOutput, TypedSpec, TypedTool};
use crate::workspace::{Access, WorkspaceGuard};

/// Reads a text file.
pub struct ReadFileTool {
    guard: Arc<WorkspaceGuard>,
    spec: TypedSpec<Arguments>,
}

/// The arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arguments {
    // No description for the model: the name says it, and every turn carries the schema.
    path: String,
    /// First line (1-based).
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// Most lines to return.
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

impl ReadFileTool {
    /// The tool over `guard`.
    pub fn new(guard: Arc<WorkspaceGuard>) -> Self {
        let spec = TypedSpec::new(
            "read_file",
            "Read a text file or an image (relative to the workspace). Text over 256 KiB is \
             cut; offset/limit (lines) read on.",
        );
        Self { guard, spec }
    }
}

#[async_trait]
impl TypedTool for ReadFileTool {
    type Arguments = Arguments;

    fn definition(&self) -> &TypedSpec<Arguments> {
        &self.spec
    }

    fn effects(&self) -> Effects {
        Effects::of(&[Effect::ReadsFiles])
    }

    async fn run(&self, arguments: Arguments, context: &ToolContext) -> ToolOutput {
        if arguments.offset == Some(0) || arguments.limit == Some(0) {
            return ToolOutput::error("Error: offset and limit start at 1.");
        }
        let path = match self.guard.authorize(&arguments.path, Access::Read, context) {
            Ok(path) => path,
            Err(refusal) => return refusal,
        };
        let offset = arguments.offset.unwrap_or(1);
        let limit = arguments.limit.unwrap_or(usize::MAX);
        // A file someone sent is theirs to write: it reaches the model fenced, like a page.
        let from_outside = self.guard.is_attachment(&path);
        let guard = self.guard.clone();
        let output = blocking("read_file", move || {
            read(
                Some(&guard),
                &path,
                &arguments.path,
                offset,
                limit,
                READ_CAP,
            )
        })
        .await;
        if from_outside && !output.is_error {
            output.from_outside()
        } else {
            output
        }
    }
}

/// Why reading stopped before the end of the file.
enum Stop {
    End,
    Limit,
    Cap,
}

/// Reads lines `offset..offset + limit` of `path`, at most `cap` bytes of them; beneath the
/// directory `guard` confines it to, when given.
pub(super) fn read(
    guard: Option<&WorkspaceGuard>,
    path: &Path,
    shown: &str,
    offset: usize,
    limit: usize,
    cap: usize,
) -> ToolOutput {
    let meta = match guard {
        Some(guard) => guard.metadata(path),
        None => std::fs::metadata(path),
    };
    if meta.as_ref().is_ok_and(|meta| meta.is_dir()) {
        return ToolOutput::error(format!(
            "Error: {shown} is a directory; use list_files to see its entries."
        ));
    }
    if meta.as_ref().is_ok_and(|meta| !meta.is_file()) {
        return ToolOutput::error(format!(
            "Error: {shown} is not a regular file (a device, socket or FIFO); read_file reads files."
        ));
    }
    let opened = match guard {
        Some(guard) => guard.open_read(path),
        None => File::open(path),
    };
    let file = match opened {
        Ok(file) => file,
        Err(error) => return io_failure("read", shown, &error),
    };
    let size = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let mut reader = BufReader::new(file);
    match reader.fill_buf() {
        Ok(start) => {
            if let Some(kind) = image_type(start) {
                return image(path, shown, kind, size);
            }
        }
        Err(error) => return io_failure("read", shown, &error),
    }
    let mut text = String::new();
    let mut line = Vec::new();
    let mut line_no = 0usize;
    let mut last_shown = 0usize;
    let mut partial_line = false;
    let mut stop = Stop::End;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => return io_failure("read", shown, &error),
        }
        line_no += 1;
        if line.contains(&0) {
            return binary(shown, size);
        }
        let Ok(decoded) = std::str::from_utf8(&line) else {
            return binary(shown, size);
        };
        if line_no < offset {
            continue;
        }
        if line_no - offset >= limit {
            stop = Stop::Limit;
            break;
        }
        if text.len() + decoded.len() > cap {
            if text.is_empty() {
                // A single line longer than the cap: show its start.
                let mut end = cap;
                while !decoded.is_char_boundary(end) {
                    end -= 1;
                }
                text.push_str(&decoded[..end]);
                last_shown = line_no;
                partial_line = true;
            }
            stop = Stop::Cap;
            break;
        }
        text.push_str(decoded);
        last_shown = line_no;
    }
    if line_no < offset && line_no > 0 {
        return ToolOutput::error(format!(
            "Error: {shown} has only {line_no} lines; offset {offset} is past the end."
        ));
    }
    if size == 0 || (line_no == 0 && text.is_empty()) {
        return ToolOutput::ok(format!("({shown} is empty)"));
    }
    match stop {
        Stop::End => ToolOutput::ok(text),
        Stop::Limit => ToolOutput::ok(format!(
            "{text}\n[Showing lines {offset}-{last_shown}; the file goes on. Continue with offset={}.]",
            last_shown + 1
        )),
        Stop::Cap => ToolOutput::ok(format!(
            "{text}\n[Cut at {} KiB: showing lines {offset}-{last_shown} of a {size}-byte file. \
             Continue with offset={}{}.]",
            cap / 1024,
            last_shown + 1,
            if partial_line {
                " (that line was itself longer than the cap and is shown only in part)"
            } else {
                ""
            }
        )),
    }
}

/// An image: named in the text, shown to a model that reads images (see
/// [`ToolOutput::images`]).
fn image(path: &Path, shown: &str, kind: &str, size: u64) -> ToolOutput {
    ToolOutput::ok(format!(
        "{shown} is an image ({kind}, {size} bytes). A model that reads images is shown it \
         after the tool results; to one that cannot, this line is all read_file gives."
    ))
    .with_image(path.to_string_lossy())
}

fn binary(shown: &str, size: u64) -> ToolOutput {
    ToolOutput::error(format!(
        "Error: {shown} is not a UTF-8 text file ({size} bytes; binary content). read_file only \
         reads text; use the shell tool (e.g. `file`, `xxd | head`) to inspect it."
    ))
}
