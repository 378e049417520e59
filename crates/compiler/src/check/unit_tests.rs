//! Unit tests of the checker's parts that the corpus cannot isolate.
