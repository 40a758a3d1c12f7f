//! #25 item 3: an image the agent reads itself, with `read_file`, through the real binary,
//! reaches a model that reads images as an image part after the results, and another model
//! as a line. Images people send through the channels: `tests/servers/vision.rs`.

use base64::Engine;
use serde_json::Value;

use crate::support::bin::{stderr, stdout};
use crate::support::config::TestConfig;
use crate::support::home::Home;
use crate::support::images::{PNG, last_user, png_of};
use crate::support::scripted_llm::{Reply, ScriptedLlm};

/// `read_file` of a PNG in the workspace, run by `squidbot agent -m`: a model that reads images
/// gets the file's bytes as an image part in a user message right after the tool results (Chat
/// Completions take image parts only from the user), the tool result itself stays text; a
/// model that reads none gets a line naming the image and no image part anywhere. The history
/// keeps the path, never the bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_read_file_reads_reaches_a_vision_model_after_the_results_and_others_as_a_line() {
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    for (model, vision) in [("gpt-4o", true), ("llama3.1:8b", false)] {
        let llm = ScriptedLlm::start().await;
        llm.enqueue(Reply::ToolCalls {
            text: String::new(),
            calls: vec![(
                "call_read".into(),
                "read_file".into(),
                r#"{"path": "pics/dot.png"}"#.into(),
            )],
        });
        llm.enqueue(Reply::Text("a single dot".into()));
        let home = Home::new();
        TestConfig::new(&llm.url())
            .api_key("test-key")
            .model(model)
            .write(home.path());
        let pics = home.path().join("workspace/pics");
        std::fs::create_dir_all(&pics).unwrap();
        std::fs::write(pics.join("dot.png"), &png).unwrap();

        let output = home.run(&["agent", "-m", "what is in pics/dot.png?"]).await;
        assert!(output.status.success(), "{model}: {}", stderr(&output));
        assert!(stdout(&output).contains("a single dot"), "{model}");

        let requests = llm.requests();
        assert_eq!(requests.len(), 2, "{model}");
        let messages = requests[1]["messages"].as_array().unwrap();
        let result = messages
            .iter()
            .position(|m| m["role"] == "tool")
            .unwrap_or_else(|| panic!("{model}: no tool result in {messages:?}"));
        let text = messages[result]["content"]
            .as_str()
            .unwrap_or_else(|| panic!("{model}: a tool result is text: {}", messages[result]));
        assert!(
            text.contains("pics/dot.png is an image (image/png, 70 bytes)"),
            "{model}: {text}"
        );
        let parts: Vec<&Value> = messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|part| part["type"] == "image_url")
            .collect();
        if vision {
            let after = &messages[result + 1];
            assert_eq!(after["role"], "user", "{model}: {after}");
            let (images, _) = last_user(&requests[1]);
            assert_eq!(images.len(), 1, "{model}");
            assert_eq!(parts.len(), 1, "{model}: only that one image part");
            assert_eq!(png_of(&images[0]), png, "{model}: the file's bytes");
        } else {
            assert!(parts.is_empty(), "{model}: {parts:?}");
            assert_eq!(
                messages.len(),
                result + 1,
                "{model}: nothing after the result"
            );
        }
        let sessions = home.path().join("sessions");
        for entry in std::fs::read_dir(&sessions).unwrap() {
            let history = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
            assert!(
                !history.contains(&PNG[..40]),
                "{model}: bytes in the history"
            );
        }
    }
}
