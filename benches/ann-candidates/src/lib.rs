//! Nothing: the benchmark lives in benches/candidates.rs.
