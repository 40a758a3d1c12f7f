//! [`Profile`]: what one model's requests must look like for its provider to accept them.
//!
//! "OpenAI-compatible" servers differ in what they accept, and each difference fails every
//! call of some model until someone reads that provider's documentation:
//!
//! - OpenAI's reasoning models (o1, o3, o4-mini, gpt-5…) refuse `max_tokens` and want
//!   `max_completion_tokens` (<https://platform.openai.com/docs/guides/reasoning>).
//! - Mistral accepts only tool-call ids of 9 letters and digits, so a history written with
//!   another provider's ids (or a pool falling back to Mistral) fails with HTTP 422
//!   (<https://docs.mistral.ai/capabilities/function_calling/>).
//! - Gemini 3 wants each function call's `thought_signature` back in the next request, and for
//!   calls it did not write, the documented placeholder
//!   (<https://ai.google.dev/gemini-api/docs/thought-signatures>).
//! - DeepSeek's thinking mode and Moonshot's Kimi want the assistant's `reasoning_content` back
//!   on tool-call turns (<https://api-docs.deepseek.com/guides/thinking_mode>).
//!
//! Every setting can be stated in `llm.models.<name>` (and `supports_reasoning_content` in the
//! provider); `auto`, the default, decides from the model id and the API's host, so the common
//! models need no reading of provider docs. `squidbot doctor` warns where a stated setting
//! contradicts what the provider is known to want.

/// Which field carries the reply's token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLimit {
    /// `max_tokens` (most servers).
    MaxTokens,
    /// `max_completion_tokens` (OpenAI's reasoning models; OpenAI accepts it for all models).
    MaxCompletionTokens,
    /// No limit is sent.
    Omit,
}

/// How tool-call ids must look when history goes back to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallIds {
    /// Any id is accepted.
    Any,
    /// Exactly 9 ASCII letters and digits (Mistral).
    NineAlphanumerics,
}

/// What one model's requests look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The token-limit field.
    pub token_limit: TokenLimit,
    /// The tool-call id rule.
    pub tool_call_ids: ToolCallIds,
    /// Whether tools are offered at all (a model without tool support refuses them).
    pub tools: bool,
    /// Whether the assistant's reasoning goes back on tool-call turns (an empty string when a
    /// turn had none).
    pub echo_reasoning: bool,
    /// Whether provider state on tool calls goes back (Gemini's thought signatures), with the
    /// documented placeholder for calls another model made.
    pub echo_signatures: bool,
    /// Whether the model reads images: images a person sent go to it as image parts (see
    /// `images`); other models get the saved path in the text.
    pub vision: bool,
}

impl Default for Profile {
    /// What a plain OpenAI-compatible server accepts.
    fn default() -> Self {
        Self {
            token_limit: TokenLimit::MaxTokens,
            tool_call_ids: ToolCallIds::Any,
            tools: true,
            echo_reasoning: false,
            echo_signatures: false,
            vision: false,
        }
    }
}

/// Gemini's documented value for a function call that carries no signature of its own.
pub const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

impl Profile {
    /// The profile `auto` means for `model` (the id sent to the API) at `api_base`.
    pub fn detect(api_base: &str, model: &str) -> Self {
        let host = url::Url::parse(api_base)
            .ok()
            .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
            .unwrap_or_default();
        // `openai/o3-mini` at OpenRouter, `models/gemini-3-pro` at Google: the last segment.
        let id = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let vendor = model
            .split('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let openai_reasoning = (id.len() > 1
            && id.starts_with('o')
            && id[1..].starts_with(|c: char| c.is_ascii_digit()))
            || id.starts_with("gpt-5");
        let mistral = host.ends_with("mistral.ai")
            || vendor == "mistralai"
            || [
                "mistral",
                "magistral",
                "codestral",
                "ministral",
                "pixtral",
                "devstral",
            ]
            .iter()
            .any(|family| id.starts_with(family));
        let gemini =
            host.ends_with("generativelanguage.googleapis.com") || id.starts_with("gemini");
        let deepseek_thinking = id.contains("deepseek-reasoner")
            || (id.contains("deepseek") && (id.contains("think") || id.contains("r1")));
        let kimi = host.ends_with("moonshot.ai")
            || host.ends_with("moonshot.cn")
            || id.starts_with("kimi");
        Self {
            token_limit: if openai_reasoning {
                TokenLimit::MaxCompletionTokens
            } else {
                TokenLimit::MaxTokens
            },
            tool_call_ids: if mistral {
                ToolCallIds::NineAlphanumerics
            } else {
                ToolCallIds::Any
            },
            tools: true,
            echo_reasoning: deepseek_thinking || kimi,
            echo_signatures: gemini,
            vision: reads_images(&id),
        }
    }
}

/// Whether a model id (its last segment, lower case) names a model family known to read
/// images. A guess for `auto`; `llm.models.<name>.vision` settings it either way.
fn reads_images(id: &str) -> bool {
    const FAMILIES: [&str; 20] = [
        "gpt-4o",
        "gpt-4.1",
        "gpt-4-turbo",
        "gpt-5",
        "chatgpt-4o",
        "o1",
        "o3",
        "o4",
        "claude",
        "gemini",
        "gemma-3",
        "gemma3",
        "llava",
        "pixtral",
        "llama-4",
        "llama3.2-vision",
        "grok-4",
        "mistral-medium",
        "mistral-small",
        "minicpm-v",
    ];
    FAMILIES.iter().any(|family| id.starts_with(family))
        || ["vision", "-vl", "vl-", "qwen2.5vl", "qwen3-vl"]
            .iter()
            .any(|mark| id.contains(mark))
}

/// `id` as [`ToolCallIds`] wants it: unchanged when it already fits, else 9 letters and
/// digits derived from it (the same id always gives the same result, so a call and its result
/// still match).
pub fn tool_call_id(id: &str, rule: ToolCallIds) -> std::borrow::Cow<'_, str> {
    match rule {
        ToolCallIds::Any => std::borrow::Cow::Borrowed(id),
        ToolCallIds::NineAlphanumerics
            if id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            std::borrow::Cow::Borrowed(id)
        }
        ToolCallIds::NineAlphanumerics => {
            const ALPHABET: &[u8] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
            let mut hash = stable_hash(id);
            let mut out = String::with_capacity(9);
            for _ in 0..9 {
                out.push(char::from(ALPHABET[(hash % 62) as usize]));
                hash /= 62;
                if hash == 0 {
                    hash = 0x9e37_79b9_7f4a_7c15;
                }
            }
            std::borrow::Cow::Owned(out)
        }
    }
}

/// FNV-1a of `text`: stable across runs and builds (std's hasher is not), so an id rewritten
/// for a provider's rule is the same in every request.
pub(crate) fn stable_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_models_get_what_their_provider_wants() {
        let openai = "https://api.openai.com/v1";
        for model in [
            "o1",
            "o3-mini",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "openai/o3",
        ] {
            assert_eq!(
                Profile::detect(openai, model).token_limit,
                TokenLimit::MaxCompletionTokens,
                "{model}"
            );
        }
        for model in ["gpt-4o", "gpt-4.1-mini", "omni-moderation", "llama3"] {
            assert_eq!(
                Profile::detect(openai, model).token_limit,
                TokenLimit::MaxTokens,
                "{model}"
            );
        }
        let mistral = Profile::detect("https://api.mistral.ai/v1", "mistral-large-latest");
        assert_eq!(mistral.tool_call_ids, ToolCallIds::NineAlphanumerics);
        let routed = Profile::detect("https://openrouter.ai/api/v1", "mistralai/magistral-medium");
        assert_eq!(routed.tool_call_ids, ToolCallIds::NineAlphanumerics);
        assert!(
            Profile::detect(
                "https://generativelanguage.googleapis.com/v1beta/openai/",
                "gemini-3-pro-preview"
            )
            .echo_signatures
        );
        assert!(Profile::detect("https://api.deepseek.com", "deepseek-reasoner").echo_reasoning);
        assert!(!Profile::detect("https://api.deepseek.com", "deepseek-chat").echo_reasoning);
        assert_eq!(
            Profile::detect("http://localhost:11434/v1", "qwen3:8b"),
            Profile::default()
        );
        for model in [
            "gpt-4o-mini",
            "anthropic/claude-sonnet-4",
            "llava:13b",
            "qwen2.5-vl-7b",
        ] {
            assert!(Profile::detect(openai, model).vision, "{model}");
        }
        for model in [
            "gpt-3.5-turbo",
            "deepseek-chat",
            "llama3.1:8b",
            "o3-mini-high",
        ] {
            let vision = Profile::detect(openai, model).vision;
            assert_eq!(vision, model.starts_with("o3"), "{model}");
        }
    }

    #[test]
    fn tool_call_ids_fit_mistral_and_stay_paired() {
        let rule = ToolCallIds::NineAlphanumerics;
        assert_eq!(tool_call_id("abcDEF123", rule), "abcDEF123");
        let long = tool_call_id("call_7f3a9c2e1b8d4f60a5e3", rule);
        assert_eq!(long.len(), 9);
        assert!(long.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(long, tool_call_id("call_7f3a9c2e1b8d4f60a5e3", rule));
        assert_ne!(long, tool_call_id("call_7f3a9c2e1b8d4f60a5e4", rule));
        assert_eq!(tool_call_id("call_x", ToolCallIds::Any), "call_x");
    }
}
