//! Any text through folding and phrase matching: folding never panics, is idempotent and leaves
//! nothing it promises to remove, and each piece of a text's folded form is found in the text
//! however its letters were disguised.

use src_compiler::text::{fold, unhide, PhraseSet};

/// Checks the folding properties on `text`; the error says which one failed.
pub fn check_text(text: &str) -> Result<(), String> {
    let once = fold(text).into_owned();
    let twice = fold(&once).into_owned();
    if once != twice {
        return Err(format!("fold is not idempotent: {once:?} then {twice:?}"));
    }
    if let Some(c) = once
        .chars()
        .find(|&c| c.is_ascii_uppercase() || (c.is_control() && !c.is_whitespace()))
    {
        return Err(format!("fold left {c:?} in {once:?}"));
    }
    let regex_view = unhide(text).into_owned();
    if unhide(&regex_view) != regex_view {
        return Err(format!("unhide is not idempotent on {regex_view:?}"));
    }
    // Each whitespace-separated piece of the folded text, searched for in the original text, is
    // found there: whitespace always is a boundary, so no rule of matching can reject it.
    for piece in once.split_whitespace().take(8) {
        if !PhraseSet::new(&[piece.to_string()]).contains(text) {
            return Err(format!("{piece:?} from the folded text is not found in it"));
        }
    }
    Ok(())
}
