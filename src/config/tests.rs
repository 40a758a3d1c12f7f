//! Tests of loading and validation.
