//! Which of the owner's private parts a request carried, for the privacy suites of the
//! channels (a shared room, a stranger's mail).

use serde_json::Value;

use crate::support::bin::tool_names;
use crate::support::scripted_llm::last_user_text;

/// Plants the owner's private memory in the workspace of `home`: MEMORY.md holding
/// `MEMORYMARK: memory` and USER.md holding `USERMARK: user`, the markers
/// [`private_parts`] looks for.
pub fn plant_private_memory(home: &std::path::Path, memory: &str, user: &str) {
    let workspace = home.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("MEMORY.md"),
        format!("- MEMORYMARK: {memory}\n"),
    )
    .unwrap();
    std::fs::write(
        workspace.join("USER.md"),
        format!("# User\n- USERMARK: {user}\n"),
    )
    .unwrap();
}

/// Whether the first recorded request whose last user message satisfies `asked` carried the
/// owner's private memory: `(MEMORY.md, USER.md, memory_write offered)`, told apart by the
/// markers `MEMORYMARK` and `USERMARK` the privacy tests plant.
pub fn private_parts(requests: &[Value], asked: impl Fn(&str) -> bool) -> (bool, bool, bool) {
    let request = requests
        .iter()
        .find(|r| asked(&last_user_text(r)))
        .expect("a request for the message");
    let system = request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    let tools = tool_names(request);
    (
        system.contains("MEMORYMARK"),
        system.contains("USERMARK"),
        tools.iter().any(|t| t == "memory_write"),
    )
}
