//! Choosing a request's injected fault: from the `x-sim-fault` header when a test asks for one,
//! otherwise drawn from the model's configured rates.

use std::time::Duration;

use hyper::StatusCode;
use rand::rngs::StdRng;
use rand::RngExt;

use super::config::SimFaults;
use crate::headers::SIM_FAULT;
use crate::openai::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    /// Answer with this status before any byte of an answer.
    Error(StatusCode),
    /// Hold the slot this long before answering; `None` holds it until the client leaves.
    Stall(Option<Duration>),
    /// Drop the connection after this many output tokens.
    Disconnect(u32),
}

impl Fault {
    /// Reads an `x-sim-fault` value: `none`, `error[=STATUS]`, `stall[=MS]`,
    /// `disconnect[=TOKENS]`.
    pub(crate) fn parse(value: &str, defaults: &SimFaults) -> Result<Fault, ApiError> {
        let (name, argument) = match value.trim().split_once('=') {
            Some((name, argument)) => (name.trim(), Some(argument.trim())),
            None => (value.trim(), None),
        };
        let invalid = || {
            ApiError::bad_request(format!(
                "invalid `{SIM_FAULT}` value `{value}`: expected `none`, `error[=STATUS]`, \
                 `stall[=MS]` or `disconnect[=TOKENS]`"
            ))
        };
        let number = |argument: &str| argument.parse::<u64>().map_err(|_| invalid());
        match (name, argument) {
            ("none", None) => Ok(Fault::None),
            ("error", None) => Ok(Fault::Error(status(defaults.error_status))),
            ("error", Some(code)) => {
                let code = u16::try_from(number(code)?).map_err(|_| invalid())?;
                match StatusCode::from_u16(code) {
                    Ok(code) if code.is_client_error() || code.is_server_error() => {
                        Ok(Fault::Error(code))
                    }
                    _ => Err(invalid()),
                }
            }
            ("stall", None) => Ok(Fault::Stall(None)),
            ("stall", Some(ms)) => Ok(Fault::Stall(Some(Duration::from_millis(number(ms)?)))),
            ("disconnect", None) => Ok(Fault::Disconnect(defaults.disconnect_after_tokens)),
            ("disconnect", Some(tokens)) => {
                let tokens = u32::try_from(number(tokens)?).map_err(|_| invalid())?;
                Ok(Fault::Disconnect(tokens))
            }
            _ => Err(invalid()),
        }
    }

    /// Draws from the configured rates; a zero rate draws nothing, so adding a fault to one model
    /// does not shift the draws another sees.
    pub(crate) fn draw(faults: &SimFaults, rng: &mut StdRng) -> Fault {
        let mut hit = |rate: f64| rate > 0.0 && rng.random_bool(rate);
        if hit(faults.error_rate) {
            Fault::Error(status(faults.error_status))
        } else if hit(faults.stall_rate) {
            Fault::Stall(faults.stall_ms.map(Duration::from_millis))
        } else if hit(faults.disconnect_rate) {
            Fault::Disconnect(faults.disconnect_after_tokens)
        } else {
            Fault::None
        }
    }

    pub(crate) fn outcome(self) -> &'static str {
        use crate::metrics::outcome;
        match self {
            Fault::None => outcome::OK,
            Fault::Error(_) => outcome::ERROR_FAULT,
            Fault::Stall(_) => outcome::STALL_FAULT,
            Fault::Disconnect(_) => outcome::DISCONNECT_FAULT,
        }
    }
}

/// Validation keeps configured statuses in 400..=599; 500 covers anything that slipped by.
fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn header_values() {
        let d = SimFaults::default();
        assert_eq!(Fault::parse("none", &d).ok(), Some(Fault::None));
        assert_eq!(
            Fault::parse("error", &d).ok(),
            Some(Fault::Error(StatusCode::INTERNAL_SERVER_ERROR))
        );
        assert_eq!(
            Fault::parse(" error = 503 ", &d).ok(),
            Some(Fault::Error(StatusCode::SERVICE_UNAVAILABLE))
        );
        assert_eq!(Fault::parse("stall", &d).ok(), Some(Fault::Stall(None)));
        assert_eq!(
            Fault::parse("stall=250", &d).ok(),
            Some(Fault::Stall(Some(Duration::from_millis(250))))
        );
        assert_eq!(
            Fault::parse("disconnect", &d).ok(),
            Some(Fault::Disconnect(d.disconnect_after_tokens))
        );
        assert_eq!(
            Fault::parse("disconnect=0", &d).ok(),
            Some(Fault::Disconnect(0))
        );
        for bad in ["", "explode", "error=200", "error=x", "stall=-1", "none=1"] {
            assert!(Fault::parse(bad, &d).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rates_of_zero_and_one_are_exact() {
        let mut rng = StdRng::seed_from_u64(0);
        let never = SimFaults::default();
        assert!((0..100).all(|_| Fault::draw(&never, &mut rng) == Fault::None));
        let always = SimFaults {
            disconnect_rate: 1.0,
            disconnect_after_tokens: 4,
            ..SimFaults::default()
        };
        assert!((0..100).all(|_| Fault::draw(&always, &mut rng) == Fault::Disconnect(4)));
    }
}
