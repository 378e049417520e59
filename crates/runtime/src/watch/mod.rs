//! What the request path keeps for the operators watching the router, paid for only while a
//! console page is connected (or, for the counts, off the request path): the console reads it,
//! and the telemetry and the pipeline feed it.
//!
//! - [`live`]: the live decision stream, paced, one small JSON line per finished request.
//! - [`recent`]: each session's last few decisions, kept while a page watches.
//! - [`counts`]: requests per route and model over the last minute and hour.
//! - [`scrape`]: the server's metrics text read back as numbers.
//! - [`who`]: the tenant and session of a watched request.
//!
//! It sits above the log (whose request records it shows) and the session identities, and
//! below the telemetry that holds the feed and the counts.

pub mod counts;
pub mod live;
pub mod recent;
pub mod scrape;
pub mod who;
