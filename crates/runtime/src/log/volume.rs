//! How many request lines are written (`src serve --request-log`): every one (the default),
//! only the failed ones, one in N plus every failed one, or none. A request line is about 600
//! bytes, so a router serving 1,000 requests a second writes about 0.6 MB of them a second;
//! the volume is how an operator trades that against evidence.
//!
//! A failed request is one answered 400 or more, or one whose answer ended early (an `error`
//! in its line: a stream cut off, a client gone). Sampling counts requests in the order they
//! end, per process, so it needs no clock and no randomness; failures are never sampled away.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

use crate::log::RequestRecord;

/// Which request lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Volume {
    #[default]
    All,
    /// Failed requests only.
    Errors,
    /// One request in N, and every failed one.
    Sample(NonZeroU64),
    Off,
}

/// A `--request-log` value that names no volume.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a request log volume: use `all`, `errors`, `sample:N` (N ≥ 1) or `off`")]
pub struct UnknownVolume(String);

impl FromStr for Volume {
    type Err = UnknownVolume;

    fn from_str(text: &str) -> Result<Volume, UnknownVolume> {
        let unknown = || UnknownVolume(text.to_owned());
        match text.trim() {
            "all" => Ok(Volume::All),
            "errors" => Ok(Volume::Errors),
            "off" => Ok(Volume::Off),
            other => {
                let n = other.strip_prefix("sample:").ok_or_else(unknown)?;
                let n: u64 = n.parse().map_err(|_| unknown())?;
                NonZeroU64::new(n).map(Volume::Sample).ok_or_else(unknown)
            }
        }
    }
}

impl fmt::Display for Volume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Volume::All => f.write_str("all"),
            Volume::Errors => f.write_str("errors"),
            Volume::Sample(n) => write!(f, "sample:{n}"),
            Volume::Off => f.write_str("off"),
        }
    }
}

impl Volume {
    /// Whether the line of `record` is written; `nth` counts the requests ended before it.
    pub fn keeps(self, record: &RequestRecord, nth: u64) -> bool {
        match self {
            Volume::All => true,
            Volume::Off => false,
            Volume::Errors => failed(record),
            Volume::Sample(n) => failed(record) || nth.is_multiple_of(n.get()),
        }
    }
}

/// Whether a request failed: a status of 400 or more, or an answer that ended early.
pub fn failed(record: &RequestRecord) -> bool {
    record.status >= 400 || record.error.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: u16, error: Option<&str>) -> RequestRecord {
        RequestRecord {
            status,
            error: error.map(str::to_owned),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn every_volume_reads_back_as_written_and_nonsense_is_refused() {
        for text in ["all", "errors", "sample:10", "off"] {
            let volume: Volume = text.parse().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(volume.to_string(), text);
        }
        assert_eq!(Volume::default(), Volume::All);
        for bad in [
            "",
            "some",
            "sample:",
            "sample:0",
            "sample:-1",
            "sample:x",
            "ALL",
        ] {
            let err = bad.parse::<Volume>().err();
            assert!(err.is_some(), "`{bad}` was accepted");
        }
    }

    #[test]
    fn each_volume_keeps_what_it_says() {
        let ok = record(200, None);
        let refused = record(422, None);
        let cut = record(200, Some("upstream stream failed"));
        let kept = |v: Volume, r: &RequestRecord| (0..10).filter(|&n| v.keeps(r, n)).count();
        assert_eq!(
            [kept(Volume::All, &ok), kept(Volume::Off, &refused)],
            [10, 0]
        );
        assert_eq!(
            [
                kept(Volume::Errors, &ok),
                kept(Volume::Errors, &refused),
                kept(Volume::Errors, &cut)
            ],
            [0, 10, 10]
        );
        let one_in_5 = Volume::Sample(NonZeroU64::MIN.saturating_add(4));
        assert_eq!([kept(one_in_5, &ok), kept(one_in_5, &refused)], [2, 10]);
    }
}
