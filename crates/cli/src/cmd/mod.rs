//! One module per subcommand.

pub mod check;
pub mod envoy;
pub mod explain;
pub mod fmt;
pub mod policy;
pub mod serve;
pub mod test;
