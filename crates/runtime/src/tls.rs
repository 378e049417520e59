//! TLS to backends: the rustls client configuration that `https` backend URLs are reached with.
//!
//! Certificates are checked against the platform's trust store (what `rustls-native-certs`
//! finds: `SSL_CERT_FILE`, `SSL_CERT_DIR` or the distribution's bundle), or against the Mozilla
//! roots compiled in (`webpki-roots`) when the platform has none, as in a bare container. An
//! operator's extra bundle (`--backend-ca`, for a private CA) is trusted on top of either. The
//! crypto provider is `ring`, chosen explicitly so no process-wide default is consulted.
//! ALPN (HTTP/2 or HTTP/1.1) is offered by the connector that `upstream` builds on this
//! configuration.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// Why the backend TLS configuration could not be built (the server does not start). Each
/// message is whole: the underlying error is part of it, not a separate source.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the backend CA bundle `{}`: {cause}", path.display())]
    ReadCa {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the backend CA bundle `{}` is not PEM: {detail}", path.display())]
    NotPem { path: PathBuf, detail: String },
    #[error("the backend CA bundle `{}` holds no certificate", path.display())]
    NoCertificate { path: PathBuf },
    #[error("the backend CA bundle `{}` holds a certificate that cannot be trusted: {cause}", path.display())]
    BadCertificate { path: PathBuf, cause: rustls::Error },
    #[error("cannot set up TLS to backends: {0}")]
    Setup(rustls::Error),
}

/// Where the trusted roots came from (for the start-up log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootSource {
    /// The platform's trust store.
    Native,
    /// The Mozilla roots compiled into the binary (the platform had none).
    Bundled,
}

impl RootSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RootSource::Native => "native",
            RootSource::Bundled => "webpki-roots",
        }
    }
}

/// The trusted roots: the platform's or the bundled ones, plus `extra_ca` (a PEM file).
pub fn trusted_roots(extra_ca: Option<&Path>) -> Result<(RootCertStore, RootSource), TlsError> {
    roots_over(rustls_native_certs::load_native_certs(), extra_ca)
}

/// The trusted roots over what the platform store gave.
fn roots_over(
    native: rustls_native_certs::CertificateResult,
    extra_ca: Option<&Path>,
) -> Result<(RootCertStore, RootSource), TlsError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    let source = if added > 0 {
        RootSource::Native
    } else {
        if !native.errors.is_empty() {
            tracing::debug!(errors = ?native.errors, "the platform trust store could not be read");
        }
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        RootSource::Bundled
    };
    if let Some(path) = extra_ca {
        for cert in read_bundle(path)? {
            roots.add(cert).map_err(|cause| TlsError::BadCertificate {
                path: path.to_owned(),
                cause,
            })?;
        }
    }
    Ok((roots, source))
}

/// Every certificate of a PEM bundle (other PEM sections, such as keys, are skipped).
fn read_bundle(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|cause| TlsError::ReadCa {
        path: path.to_owned(),
        cause,
    })?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::NotPem {
            path: path.to_owned(),
            detail: err.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The client configuration of TLS to backends (TLS 1.2 and 1.3, no client certificate).
pub fn client_config(extra_ca: Option<&Path>) -> Result<ClientConfig, TlsError> {
    let (roots, source) = trusted_roots(extra_ca)?;
    tracing::info!(
        roots = source.as_str(),
        count = roots.len(),
        extra_ca = ?extra_ca,
        "backend TLS trust"
    );
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Setup)?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem_of_new_ca() -> Result<String, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        Ok(params.self_signed(&key)?.pem())
    }

    #[test]
    fn the_default_trust_has_roots() -> Result<(), TlsError> {
        let (roots, _) = trusted_roots(None)?;
        assert!(!roots.is_empty());
        Ok(())
    }

    #[test]
    fn without_a_platform_store_the_bundled_roots_are_trusted() -> Result<(), TlsError> {
        let (roots, source) = roots_over(Default::default(), None)?;
        assert_eq!(source, RootSource::Bundled);
        assert_eq!(roots.len(), webpki_roots::TLS_SERVER_ROOTS.len());
        Ok(())
    }

    #[test]
    fn an_extra_ca_is_added() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, format!("{}{}", pem_of_new_ca()?, pem_of_new_ca()?))?;
        let (plain, _) = trusted_roots(None)?;
        let (with_ca, _) = trusted_roots(Some(&path))?;
        assert_eq!(with_ca.len(), plain.len() + 2);
        client_config(Some(&path))?;
        Ok(())
    }

    #[test]
    fn bad_bundles_are_refused_with_their_path() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing.pem");
        let err = client_config(Some(&missing))
            .err()
            .ok_or("expected an error")?;
        assert!(matches!(err, TlsError::ReadCa { .. }), "{err}");
        assert!(err.to_string().contains("missing.pem"), "{err}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n")?;
        let err = client_config(Some(&empty))
            .err()
            .ok_or("expected an error")?;
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");

        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )?;
        let err = client_config(Some(&broken))
            .err()
            .ok_or("expected an error")?;
        assert!(matches!(err, TlsError::NotPem { .. }), "{err}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )?;
        let err = client_config(Some(&garbage))
            .err()
            .ok_or("expected an error")?;
        assert!(matches!(err, TlsError::BadCertificate { .. }), "{err}");
        Ok(())
    }
}
