//! One module per subcommand.

pub mod check;
pub mod eval;
pub mod explain;
pub mod fmt;
pub mod policy;
pub mod replay;
pub mod serve;
pub mod test;
pub mod whatif;
