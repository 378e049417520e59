//! The words of ASCII text for fuzzy matching: maximal runs of `[A-Za-z0-9_]` (the ASCII word
//! characters of `contains`' boundary rule), found 64 bytes at a time from a bit map of the
//! word bytes, so the scan costs one step per byte and one per word with no branch per byte
//! to mispredict at every word edge.

/// Whether each byte is a word character (the rule [`word_map`] computes lane by lane).
#[cfg(test)]
const WORD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric() || b == b'_' as usize;
        b += 1;
    }
    table
};

/// Bit `j` set where byte `j` of a 64-byte block of ASCII is a word byte, eight
/// bytes at a time: each byte's class is worked out in its own lane of a `u64` (every test
/// below stays inside its lane because ASCII bytes are below 0x80), then the lanes' top bits
/// are gathered by one multiplication.
fn word_map(block: &[u8; 64]) -> u64 {
    const LANES: u64 = 0x0101_0101_0101_0101;
    const TOP: u64 = 0x80 * LANES;
    let lanes = |x: u64| {
        let lower = x | (0x20 * LANES);
        let letter = (lower + 0x1F * LANES) & ((0xFA * LANES) - lower);
        let digit = (x + 0x50 * LANES) & ((0xB9 * LANES) - x);
        let underscore = !((x ^ (0x5F * LANES)) + 0x7F * LANES);
        let word = (letter | digit | underscore) & TOP;
        // Lane `j`'s bit 7 moves to bit `j` of the top byte.
        ((word >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
    };
    let mut map = 0u64;
    for (k, part) in block.chunks_exact(8).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(part);
        map |= lanes(u64::from_le_bytes(eight)) << (8 * k);
    }
    map
}

/// Calls `f(start, end)` for every run of word bytes of `text`, in order.
pub(super) fn runs(text: &[u8], mut f: impl FnMut(usize, usize)) {
    // Where a run that is still open at the end of the block before started.
    let mut open: Option<usize> = None;
    // Whether the byte before the current block is a word byte.
    let mut carry = 0u64;
    let mut padded = [0u8; 64];
    let full = text.chunks_exact(64);
    let tail = full.remainder();
    let last: Option<&[u8]> = (!tail.is_empty()).then(|| {
        // Zero bytes, which are not word bytes, past the end of the text.
        padded[..tail.len()].copy_from_slice(tail);
        &padded[..]
    });
    for (block, chunk) in full.chain(last).enumerate() {
        // Every block is 64 bytes long; the last one is padded.
        let map = <&[u8; 64]>::try_from(chunk).map_or(0, word_map);
        let before = (map << 1) | carry;
        carry = map >> 63;
        let base = block * 64;
        // A run starts where a word byte follows another byte, and ends where another byte
        // follows a word byte; past a short last chunk the map is 0, so a run open at the end
        // of the text ends there. Within a block the k-th end closes the k-th start, after the
        // first end closes a run opened before the block.
        let mut starts = map & !before;
        let mut ends = !map & before;
        if let Some(start) = open {
            if ends == 0 {
                continue;
            }
            f(start, base + ends.trailing_zeros() as usize);
            ends &= ends - 1;
            open = None;
        }
        while starts != 0 {
            let start = base + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            if ends == 0 {
                open = Some(start);
                break;
            }
            f(start, base + ends.trailing_zeros() as usize);
            ends &= ends - 1;
        }
    }
    if let Some(start) = open {
        f(start, text.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn by_bytes(text: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, &b) in text.iter().enumerate() {
            match (WORD[usize::from(b)], start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    out.push((s, i));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push((s, text.len()));
        }
        out
    }

    proptest! {
        #[test]
        fn runs_are_the_byte_by_byte_ones(text in "[ab_9 .\n-]{0,300}") {
            let mut got = Vec::new();
            runs(text.as_bytes(), |s, e| got.push((s, e)));
            prop_assert_eq!(got, by_bytes(text.as_bytes()));
        }

        #[test]
        fn every_ascii_byte_is_classed_as_the_table_says(text in "[\\x00-\\x7f]{0,200}") {
            let mut got = Vec::new();
            runs(text.as_bytes(), |s, e| got.push((s, e)));
            prop_assert_eq!(got, by_bytes(text.as_bytes()));
        }
    }

    #[test]
    fn every_ascii_byte_in_every_lane_is_classed_as_the_table_says() {
        for b in 0u8..128 {
            for at in 0..64 {
                let mut chunk = [b' '; 64];
                chunk[at] = b;
                let want = u64::from(WORD[usize::from(b)]) << at;
                assert_eq!(word_map(&chunk), want, "byte {b:#x} at {at}");
                // The padding of a last, short block.
                let mut padded = [0u8; 64];
                padded[at] = b;
                assert_eq!(word_map(&padded), want, "byte {b:#x} before the padding");
            }
        }
    }

    #[test]
    fn runs_cross_block_edges() {
        for len in [63usize, 64, 65, 127, 128, 129] {
            let text = "a".repeat(len);
            let mut got = Vec::new();
            runs(text.as_bytes(), |s, e| got.push((s, e)));
            assert_eq!(got, vec![(0, len)], "{len}");
            let spaced = format!("{} b", "a".repeat(len));
            let mut got = Vec::new();
            runs(spaced.as_bytes(), |s, e| got.push((s, e)));
            assert_eq!(got, vec![(0, len), (len + 1, len + 2)], "{len}");
        }
    }
}
