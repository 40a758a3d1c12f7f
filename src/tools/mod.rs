//! Placeholder: filled in by the tools work.
