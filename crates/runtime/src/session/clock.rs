//! The session layer's clock: the stores' one ([`crate::store::clock`]), named here too for the
//! callers that know it by its session path.

pub use crate::store::clock::{Clock, ManualClock, SystemClock};
