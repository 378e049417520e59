//! The client's say over the response cache: the `x-sr-cache` request header (after HTTP's
//! `Cache-Control` request directives of the same names).
//!
//! - `no-cache`: no stored answer is used (the lookup is not made); the backend's answer is
//!   stored as on a miss, so it refreshes the cache;
//! - `no-store`: a stored answer may answer, but the backend's answer is not stored (a prompt
//!   the client does not want kept);
//! - both (`no-cache, no-store`): the cache is left out entirely (`bypass`).
//!
//! Any other value is the client's mistake and is refused, so a typo never silently caches.

use crate::headers::SR_CACHE;

/// What the client asked of the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Directive {
    /// Do not answer from the cache.
    pub no_cache: bool,
    /// Do not store this request's answer.
    pub no_store: bool,
}

/// An `x-sr-cache` value that is not a list of the known directives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{SR_CACHE}` must be `no-cache`, `no-store` or both, found `{found}`")]
pub struct UnknownDirective {
    pub found: String,
}

impl Directive {
    /// Reads every `x-sr-cache` header among `headers` (names in lower case): comma-separated
    /// directives, case-insensitive; no header is no directive.
    pub fn read<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Directive, UnknownDirective> {
        let mut directive = Directive::default();
        for (name, value) in headers {
            if name != SR_CACHE {
                continue;
            }
            for word in value.split(',').map(str::trim) {
                if word.eq_ignore_ascii_case("no-cache") {
                    directive.no_cache = true;
                } else if word.eq_ignore_ascii_case("no-store") {
                    directive.no_store = true;
                } else {
                    return Err(UnknownDirective {
                        found: value.to_owned(),
                    });
                }
            }
        }
        Ok(directive)
    }

    /// Whether the cache is left out entirely.
    pub fn bypasses(self) -> bool {
        self.no_cache && self.no_store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(values: &[&str]) -> Result<Directive, UnknownDirective> {
        Directive::read(values.iter().map(|v| ("x-sr-cache", *v)))
    }

    #[test]
    fn directives_are_read_from_lists_and_repeated_headers() {
        assert_eq!(read(&[]), Ok(Directive::default()));
        let both = Directive {
            no_cache: true,
            no_store: true,
        };
        assert_eq!(read(&["no-cache, No-Store"]), Ok(both));
        assert_eq!(read(&["no-cache", "no-store"]), Ok(both));
        assert!(both.bypasses());
        let refresh = read(&["no-cache"]);
        assert_eq!(refresh.map(Directive::bypasses), Ok(false));
    }

    #[test]
    fn an_unknown_value_is_refused_and_other_headers_are_ignored() {
        assert_eq!(
            read(&["no-cache", "maybe"]),
            Err(UnknownDirective {
                found: "maybe".into()
            })
        );
        assert_eq!(read(&[""]).map_err(|e| e.found), Err(String::new()));
        let other = Directive::read([("x-sr-cachet", "anything")]);
        assert_eq!(other, Ok(Directive::default()));
    }
}
