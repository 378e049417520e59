//! [`RedisUrl`]: the URL of a `store = redis("…")`, parsed once by the checker (E046).
//!
//! The runtime hands the text to its Redis client, so this accepts exactly what that client
//! (the `redis` crate, with TLS) can open, and a little less where the client would only fail
//! later, at connect time: a `redis`, `rediss`, `valkey` or `valkeys` URL naming a host that is
//! not a wildcard address, an optional non-negative database number as the path, and optional
//! `protocol` and credentials; or a `unix`, `redis+unix` or `valkey+unix` URL naming an absolute
//! socket path. The runtime's unit tests hold the two sides together: every URL accepted here
//! opens in the client. The compiler parses with `url`, as the client does, and does not depend
//! on the client itself.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;
use url::{Host, Url};

/// Schemes of a Redis server reached over TCP (`rediss` and `valkeys` over TLS).
const TCP_SCHEMES: &[&str] = &["redis", "rediss", "valkey", "valkeys"];
/// Schemes of a Redis server reached over a Unix socket.
const UNIX_SCHEMES: &[&str] = &["unix", "redis+unix", "valkey+unix"];
/// What `protocol=` may ask for.
const PROTOCOLS: &[&str] = &["2", "resp2", "3", "resp3"];

/// A URL the runtime's Redis client can open. `Debug` and `Display` show it with the password
/// replaced by `***`, so that it can be logged and printed; [`RedisUrl::as_str`] is the text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RedisUrl {
    text: String,
    tls: bool,
    /// A Unix socket, not a TCP host.
    socket: bool,
    /// The database number (0 when none is written).
    db: u32,
    /// The user name and password as written (percent-encoded), compared between the nodes
    /// of one cluster or sentinel set.
    user: String,
    password: Option<String>,
}

/// Why a text is not a [`RedisUrl`]; the messages never repeat a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedisUrlError {
    #[error("it does not parse as a URL ({0})")]
    NotAUrl(url::ParseError),
    #[error("its scheme `{0}` is not `redis`, `rediss`, `valkey`, `valkeys` or a `unix` one")]
    Scheme(String),
    #[error("it names no host")]
    NoHost,
    #[error("it names the wildcard address `{0}`, which a client cannot connect to")]
    Wildcard(String),
    #[error("its fragment `#{0}` is not `#insecure`, the only one understood")]
    Fragment(String),
    #[error("its database `{0}` is not a non-negative integer")]
    Database(String),
    #[error("its user name or password is not UTF-8 once percent-decoded")]
    Credentials,
    #[error("it asks for protocol `{0}`; write `2`, `resp2`, `3` or `resp3`")]
    Protocol(String),
    #[error("it names no absolute socket path")]
    SocketPath,
}

impl RedisUrl {
    /// Parses `text` as the runtime's Redis client will.
    pub fn parse(text: &str) -> Result<RedisUrl, RedisUrlError> {
        let url = Url::parse(text).map_err(RedisUrlError::NotAUrl)?;
        let scheme = url.scheme();
        let (tcp, unix) = (
            TCP_SCHEMES.contains(&scheme),
            UNIX_SCHEMES.contains(&scheme),
        );
        if !tcp && !unix {
            return Err(RedisUrlError::Scheme(scheme.to_owned()));
        }
        let tls = matches!(scheme, "rediss" | "valkeys");
        let query: Vec<(Cow<'_, str>, Cow<'_, str>)> = url.query_pairs().collect();
        // The client collects the query into a map: the last of a repeated key counts.
        let param = |key: &str| {
            query
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_ref())
        };
        if let Some(p) = param("protocol") {
            if !PROTOCOLS.contains(&p) {
                return Err(RedisUrlError::Protocol(p.to_owned()));
            }
        }
        let db;
        if tcp {
            let host = match url.host() {
                Some(Host::Domain(d)) if !d.is_empty() => d.to_owned(),
                Some(Host::Ipv4(v4)) => v4.to_string(),
                Some(Host::Ipv6(v6)) => v6.to_string(),
                _ => return Err(RedisUrlError::NoHost),
            };
            if host == "0.0.0.0" || host == "::" {
                return Err(RedisUrlError::Wildcard(host));
            }
            match url.fragment() {
                Some(f) if tls && f != "insecure" => {
                    return Err(RedisUrlError::Fragment(f.to_owned()))
                }
                _ => {}
            }
            db = database(url.path().trim_matches('/'))?;
            // The client decodes credentials as `percent_decode_str(..).decode_utf8()` does.
            let decoded = |s: &str| percent_decode_str(s).decode_utf8().is_ok();
            if !decoded(url.username()) || !url.password().is_none_or(decoded) {
                return Err(RedisUrlError::Credentials);
            }
        } else {
            if url.to_file_path().is_err() {
                return Err(RedisUrlError::SocketPath);
            }
            db = database(param("db").unwrap_or_default())?;
        }
        Ok(RedisUrl {
            text: text.to_owned(),
            tls,
            socket: unix,
            db,
            user: url.username().to_owned(),
            password: url.password().map(str::to_owned),
        })
    }

    /// The URL as written in the policy (what the client is given).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the connection is TLS (`rediss`, `valkeys`).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// Whether it names a Unix socket rather than a TCP host.
    pub fn is_socket(&self) -> bool {
        self.socket
    }

    /// The database number (0 when none is written).
    pub fn database(&self) -> u32 {
        self.db
    }

    /// The user name and password as written (compared, never shown).
    pub(crate) fn credentials(&self) -> (&str, Option<&str>) {
        (&self.user, self.password.as_deref())
    }
}

impl RedisUrl {
    /// The URL with its password (if any) replaced by `***`.
    pub fn redacted(&self) -> Cow<'_, str> {
        match Url::parse(&self.text) {
            Ok(mut url) if url.password().is_some() => match url.set_password(Some("***")) {
                Ok(()) => Cow::Owned(url.into()),
                Err(()) => Cow::Borrowed("<redis url>"),
            },
            _ => Cow::Borrowed(&self.text),
        }
    }
}

impl std::fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisUrl")
            .field("url", &self.redacted())
            .field("tls", &self.tls)
            .finish()
    }
}

/// An empty database (the default, 0) or a non-negative integer.
fn database(db: &str) -> Result<u32, RedisUrlError> {
    if db.is_empty() {
        return Ok(0);
    }
    db.parse::<u32>()
        .map_err(|_| RedisUrlError::Database(db.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printing_a_url_never_shows_its_password() {
        let url = RedisUrl::parse("redis://app:hunter2@cache.internal:6380/3").unwrap();
        for shown in [url.to_string(), format!("{url:?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("app:***@cache.internal:6380/3"), "{shown}");
        }
        assert_eq!(url.as_str(), "redis://app:hunter2@cache.internal:6380/3");
        let plain = RedisUrl::parse("redis://127.0.0.1:6379").unwrap();
        assert_eq!(plain.to_string(), "redis://127.0.0.1:6379");
    }

    #[test]
    fn redis_urls_parse() {
        for ok in [
            "redis://127.0.0.1:6379",
            "redis://127.0.0.1:6379/0",
            "redis://:hunter2@cache.internal:6380/3",
            "redis://user:p%40ss@[::1]:6379/",
            "rediss://cache.example.com:6380/0",
            "rediss://cache.example.com/#insecure",
            "valkey://localhost/?protocol=resp3",
            "redis://localhost/?protocol=9&protocol=2",
            "unix:///run/redis.sock",
            "redis+unix:///run/redis.sock?db=2",
        ] {
            assert!(RedisUrl::parse(ok).is_ok(), "{ok}");
        }
        assert!(RedisUrl::parse("rediss://h").is_ok_and(|u| u.is_tls()));
        assert!(RedisUrl::parse("redis://h").is_ok_and(|u| !u.is_tls()));
    }

    #[test]
    fn other_urls_say_why() {
        let why = |text: &str| RedisUrl::parse(text).err();
        assert!(matches!(
            why("127.0.0.1:6379"),
            Some(RedisUrlError::NotAUrl(_))
        ));
        assert_eq!(
            why("localhost:6379"),
            Some(RedisUrlError::Scheme("localhost".into()))
        );
        assert!(matches!(
            why("redis//host"),
            Some(RedisUrlError::NotAUrl(_))
        ));
        assert_eq!(
            why("http://not-redis"),
            Some(RedisUrlError::Scheme("http".into()))
        );
        assert_eq!(why("redis://"), Some(RedisUrlError::NoHost));
        assert_eq!(
            why("redis://0.0.0.0:6379"),
            Some(RedisUrlError::Wildcard("0.0.0.0".into()))
        );
        assert_eq!(
            why("redis://host/zero"),
            Some(RedisUrlError::Database("zero".into()))
        );
        assert_eq!(
            why("redis://host/-1"),
            Some(RedisUrlError::Database("-1".into()))
        );
        assert_eq!(
            why("rediss://host/#verify"),
            Some(RedisUrlError::Fragment("verify".into()))
        );
        assert_eq!(
            why("redis://host/?protocol=4"),
            Some(RedisUrlError::Protocol("4".into()))
        );
        assert_eq!(
            why("redis://host/?protocol=3&protocol=9"),
            Some(RedisUrlError::Protocol("9".into()))
        );
        assert_eq!(why("redis://:%FF@host"), Some(RedisUrlError::Credentials));
        assert_eq!(why("unix://host/run.sock"), Some(RedisUrlError::SocketPath));
        assert!(matches!(
            why("redis://host:notaport"),
            Some(RedisUrlError::NotAUrl(_))
        ));
    }

    #[test]
    fn messages_keep_the_password_out() {
        for bad in ["redis://:hunter2@host/x", "redis://:hunter2@host:99999"] {
            let Err(why) = RedisUrl::parse(bad) else {
                panic!("{bad} parsed");
            };
            assert!(!why.to_string().contains("hunter2"), "{why}");
        }
    }
}
