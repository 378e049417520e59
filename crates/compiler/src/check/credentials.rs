//! Where a client's credentials can travel (W009): a backend without `api_key` forwards the
//! client's `authorization` (and `api-key`, `x-api-key`) as it came, so when such backends live
//! on different hosts, a key meant for one provider is shown to another whenever a route, a
//! fallback or a client's explicit `model` picks it.
//!
//! Hosts are compared by name, ports aside (two servers on one machine are one operator's);
//! simulated backends live inside the router and are left out.

use super::Checker;
use src_dsl::{codes, Diagnostic};

impl Checker<'_> {
    pub(super) fn check_client_credentials(&mut self) {
        let mut first: Option<(String, String)> = None;
        let mut found = Vec::new();
        for (def, decl) in self.parts.backends.iter().zip(&self.decls.backends) {
            if def.simulated || !def.forward_client_auth {
                continue;
            }
            let Some(host) = host_of(&def.url) else {
                continue;
            };
            match &first {
                None => first = Some((def.name.clone(), host)),
                Some((_, first_host)) if *first_host == host => {}
                Some((first_name, first_host)) => found.push(
                    Diagnostic::warning(
                        codes::CREDENTIALS_CROSS_HOSTS,
                        format!(
                            "backend `{}` is sent the client's credentials, and so is backend \
                             `{first_name}` on another host",
                            def.name
                        ),
                        decl.name.span,
                    )
                    .with_label_message(format!(
                        "forwards the client's `authorization` to `{host}`"
                    ))
                    .with_note(format!("`{first_name}` forwards them to `{first_host}`"))
                    .with_help(format!(
                        "write `client_auth = drop` in backends that must not see a client's key, \
                         or give `{}` a key of its own: `api_key = env(\"...\")`",
                        def.name
                    )),
                ),
            }
        }
        for d in found {
            self.report(d);
        }
    }
}

/// The host of an `http(s)` URL, in lower case.
fn host_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(parsed.host_str()?.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn hosts_are_compared_without_their_ports() {
        assert_eq!(
            host_of("https://API.example.com/v1").as_deref(),
            Some("api.example.com")
        );
        assert_eq!(
            host_of("http://127.0.0.1:8000/v1").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host_of("not a url"), None);
    }
}
