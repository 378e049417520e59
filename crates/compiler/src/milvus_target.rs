//! The Milvus a `milvus("http://HOST:19530", collection = "…")` cache store names, parsed once
//! by the checker into what the runtime's client opens as it is: the gRPC endpoint (scheme, host,
//! port), the credentials the URL carries, and the collection.

use std::fmt;

/// Milvus's gRPC port, used when the URL names none.
pub const DEFAULT_PORT: u16 = 19530;

/// Milvus's metrics and health port: a URL on it reaches no gRPC API.
pub const METRICS_PORT: u16 = 9091;

/// The collection when the policy names none.
pub const DEFAULT_COLLECTION: &str = "src_cache";

/// Milvus's limit on a collection name's length.
const MAX_COLLECTION_LEN: usize = 255;

/// A Milvus endpoint and collection the runtime can open.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MilvusTarget {
    /// `http://HOST:PORT` or `https://HOST:PORT`, without credentials.
    pub endpoint: String,
    /// `USER:PASSWORD` from the URL, sent as Milvus's token.
    pub token: Option<String>,
    pub collection: String,
}

impl fmt::Debug for MilvusTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MilvusTarget")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "[REDACTED]"))
            .field("collection", &self.collection)
            .finish()
    }
}

/// Why a URL or a collection name is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MilvusUrlError {
    #[error("{0}")]
    Unreadable(String),
    #[error("its scheme is `{0}`; Milvus's gRPC API is reached over `http` or `https`")]
    Scheme(String),
    #[error("it names no host")]
    NoHost,
    #[error("port 0 is not a port")]
    ZeroPort,
    #[error("it has a path (`{0}`); a Milvus URL is `http://HOST:PORT` only")]
    Path(String),
    #[error("it has a query or a fragment; a Milvus URL is `http://HOST:PORT` only")]
    Query,
}

impl MilvusTarget {
    /// The target of `url` and `collection` (the default collection when `None`).
    pub fn parse(url: &str, collection: Option<&str>) -> Result<MilvusTarget, MilvusUrlError> {
        let parsed = url::Url::parse(url).map_err(|e| MilvusUrlError::Unreadable(e.to_string()))?;
        let scheme = parsed.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(MilvusUrlError::Scheme(scheme.to_owned()));
        }
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or(MilvusUrlError::NoHost)?;
        let port = parsed.port().unwrap_or(DEFAULT_PORT);
        if port == 0 {
            return Err(MilvusUrlError::ZeroPort);
        }
        if !matches!(parsed.path(), "" | "/") {
            return Err(MilvusUrlError::Path(parsed.path().to_owned()));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(MilvusUrlError::Query);
        }
        let token = (!parsed.username().is_empty()).then(|| {
            let user = percent(parsed.username());
            let password = parsed.password().map(percent).unwrap_or_default();
            format!("{user}:{password}")
        });
        Ok(MilvusTarget {
            endpoint: format!("{scheme}://{host}:{port}"),
            token,
            collection: collection.unwrap_or(DEFAULT_COLLECTION).to_owned(),
        })
    }

    /// The port the endpoint names.
    pub fn port(&self) -> Option<u16> {
        self.endpoint.rsplit(':').next()?.parse().ok()
    }
}

fn percent(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Why Milvus would refuse `name` as a collection name (it must start with a letter or an
/// underscore and hold only letters, digits and underscores, at most 255 of them); `None` when
/// it is fine.
pub fn collection_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Some("it is empty".into());
    };
    if !(first.is_ascii_alphabetic() || first == '_') {
        return Some(format!(
            "it starts with `{first}`; a name starts with a letter or `_`"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        return Some(format!(
            "it holds `{bad}`; a name holds only letters, digits and `_`"
        ));
    }
    if name.len() > MAX_COLLECTION_LEN {
        return Some(format!(
            "it is {} characters long; the longest Milvus takes is {MAX_COLLECTION_LEN}",
            name.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_become_endpoints_with_their_port_and_token() {
        let t = MilvusTarget::parse("http://127.0.0.1:19531", None).unwrap();
        assert_eq!(t.endpoint, "http://127.0.0.1:19531");
        assert_eq!(t.token, None);
        assert_eq!(t.collection, DEFAULT_COLLECTION);
        assert_eq!(t.port(), Some(19531));
        let t = MilvusTarget::parse("https://root:Mil%40vus@milvus.internal/", Some("c")).unwrap();
        assert_eq!(t.endpoint, "https://milvus.internal:19530");
        assert_eq!(t.token.as_deref(), Some("root:Mil@vus"));
        assert_eq!(t.collection, "c");
        assert!(!format!("{t:?}").contains("Mil@vus"));
    }

    #[test]
    fn unusable_urls_say_why() {
        let err = |u: &str| MilvusTarget::parse(u, None).unwrap_err();
        assert_eq!(err("grpc://h:19530"), MilvusUrlError::Scheme("grpc".into()));
        assert_eq!(err("http://h:0"), MilvusUrlError::ZeroPort);
        assert_eq!(err("http://h:19530/db"), MilvusUrlError::Path("/db".into()));
        assert_eq!(err("http://h:19530?x=1"), MilvusUrlError::Query);
        assert!(matches!(err("h:19530"), MilvusUrlError::Scheme(_)));
        assert!(matches!(
            err("http://h:99999"),
            MilvusUrlError::Unreadable(_)
        ));
        assert!(matches!(err("127.0.0.1"), MilvusUrlError::Unreadable(_)));
    }

    #[test]
    fn collection_names_follow_milvus_rules() {
        assert_eq!(collection_problem("src_cache"), None);
        assert_eq!(collection_problem("_c9"), None);
        assert!(collection_problem("").is_some());
        assert!(collection_problem("9c").is_some());
        assert!(collection_problem("my-cache").unwrap().contains('-'));
        assert!(collection_problem(&"c".repeat(256)).is_some());
    }
}
