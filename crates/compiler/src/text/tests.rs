//! Unit tests for the text builtins.
