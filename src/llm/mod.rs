//! Placeholder: filled in by the llm work.
