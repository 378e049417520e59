//! Unit tests for request fact extraction.
