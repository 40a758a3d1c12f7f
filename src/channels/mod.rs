//! Placeholder: filled in by the channels work.
