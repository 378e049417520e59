//! One module per subcommand.

pub mod calibrate;
pub mod check;
pub mod doctor;
pub mod envoy;
pub mod eval;
pub mod explain;
pub mod fmt;
pub mod import;
pub mod manifest;
pub mod policy;
pub mod replay;
pub mod serve;
pub mod test;
pub mod whatif;
