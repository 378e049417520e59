//! `file:` URIs ↔ paths.
//!
//! lsp-types 0.97 carries URIs as `fluent_uri` values without file-path helpers, so the
//! conversion is written here once: percent-encoding every byte outside the unreserved set and
//! `/`, and decoding on the way back. Anything that is not a `file:` URI has no path.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use lsp_types::Uri;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Bytes a path keeps as they are: the unreserved set and `/`.
const PATH_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// The path of a `file:` URI (`file:///a/b.sr`, `file://localhost/a/b.sr`).
pub fn uri_to_path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let text = percent_decode_str(rest).decode_utf8().ok()?;
    Some(PathBuf::from(text.as_ref()))
}

/// The `file:` URI of an absolute path.
pub fn path_to_uri(path: &Path) -> Option<Uri> {
    let text = path.to_str()?;
    if !text.starts_with('/') {
        return None;
    }
    let out = format!("file://{}", utf8_percent_encode(text, PATH_KEEP));
    Uri::from_str(&out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_spaces_and_non_ascii_round_trip() {
        let path = PathBuf::from("/tmp/my policies/ré中/routing.sr");
        let uri = path_to_uri(&path).unwrap();
        assert!(uri
            .as_str()
            .starts_with("file:///tmp/my%20policies/r%C3%A9"));
        assert_eq!(uri_to_path(&uri), Some(path));
    }

    #[test]
    fn other_schemes_have_no_path() {
        let uri = Uri::from_str("untitled:Untitled-1").unwrap();
        assert_eq!(uri_to_path(&uri), None);
        let uri = Uri::from_str("file://localhost/a/b.sr").unwrap();
        assert_eq!(uri_to_path(&uri), Some(PathBuf::from("/a/b.sr")));
    }
}
