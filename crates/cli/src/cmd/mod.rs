//! One module per subcommand.

pub mod check;
pub mod doctor;
pub mod explain;
pub mod fmt;
pub mod manifest;
pub mod policy;
pub mod serve;
pub mod test;
