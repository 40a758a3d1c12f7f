//! Placeholder: filled in by the storage work.
