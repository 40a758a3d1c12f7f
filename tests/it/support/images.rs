//! Images in requests: a 1×1 PNG to send, and the image parts a request carried, read back
//! byte for byte (the vision suites of `tests/it` and `tests/servers`).

use base64::Engine;
use serde_json::Value;

/// A 1×1 PNG.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// The image parts and the text of the last user message of a request.
pub fn last_user(request: &Value) -> (Vec<String>, String) {
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    match &user["content"] {
        Value::String(text) => (Vec::new(), text.clone()),
        Value::Array(parts) => {
            let images = parts
                .iter()
                .filter(|p| p["type"] == "image_url")
                .map(|p| p["image_url"]["url"].as_str().unwrap().to_owned())
                .collect();
            let text = parts
                .iter()
                .filter(|p| p["type"] == "text")
                .map(|p| p["text"].as_str().unwrap())
                .collect();
            (images, text)
        }
        other => panic!("content {other}"),
    }
}

/// The bytes of a PNG sent as a `data:` URL.
pub fn png_of(url: &str) -> Vec<u8> {
    let data = url
        .strip_prefix("data:image/png;base64,")
        .unwrap_or_else(|| panic!("not a PNG data URL: {url}"));
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
}
