//! The optimal-string-alignment distance of two words, with a budget past which it gives up.
//!
//! Words of up to 64 characters take the bit-parallel form of the distance (Hyyrö, "A bit-vector
//! algorithm for computing Levenshtein and Damerau edit distances", 2003: Myers's column
//! encoding plus a transposition term): one column of the distance table is a pair of 64-bit
//! masks, and each character of the other word advances it with a dozen word operations, where
//! the table itself costs a comparison and three minimums per cell. Longer words fill the table
//! row by row.

/// The most pattern characters one column mask holds.
const WIDE: usize = u64::BITS as usize;

/// Scratch kept between calls, so that comparing words allocates nothing once warm.
pub(super) struct Distance {
    /// The pattern word: the one side of the comparisons until the next [`Distance::learn`].
    learnt: Vec<char>,
    /// Per character of the pattern: the positions where it occurs, bit `j` for position `j`
    /// (left empty for a pattern too long for one mask).
    ascii: [u64; 128],
    /// The same for characters outside ASCII, searched in order (a word has few of them).
    other: Vec<(char, u64)>,
    before: Vec<usize>,
    previous: Vec<usize>,
    current: Vec<usize>,
}

impl Default for Distance {
    fn default() -> Distance {
        Distance {
            learnt: Vec::new(),
            ascii: [0; 128],
            other: Vec::new(),
            before: Vec::new(),
            previous: Vec::new(),
            current: Vec::new(),
        }
    }
}

impl Distance {
    /// The distance of `a` and `b`, or `None` when it exceeds `budget`.
    pub(super) fn bounded(&mut self, a: &[char], b: &[char], budget: usize) -> Option<usize> {
        if a.len().abs_diff(b.len()) > budget {
            return None;
        }
        // The distance is symmetric, so either word can be the pattern.
        let (pattern, other) = if a.len() <= WIDE { (a, b) } else { (b, a) };
        self.learn(pattern);
        self.to(other, budget)
    }

    /// Makes `word` the pattern that [`Distance::to`] measures from. Comparing one word with
    /// many then learns it once.
    pub(super) fn learn(&mut self, word: &[char]) {
        self.forget();
        self.learnt.extend_from_slice(word);
        if word.len() > WIDE {
            return;
        }
        for (j, &c) in word.iter().enumerate() {
            let bit = 1u64 << j;
            match self.ascii.get_mut(c as usize) {
                Some(m) => *m |= bit,
                None => match self.other.iter_mut().find(|(o, _)| *o == c) {
                    Some((_, m)) => *m |= bit,
                    None => self.other.push((c, bit)),
                },
            }
        }
    }

    /// The distance of the learnt word and `other`, or `None` when it exceeds `budget`.
    pub(super) fn to(&mut self, other: &[char], budget: usize) -> Option<usize> {
        let m = self.learnt.len();
        if m.abs_diff(other.len()) > budget {
            return None;
        }
        if self.learnt == other {
            return Some(0);
        }
        if m == 0 {
            return Some(other.len()).filter(|&d| d <= budget);
        }
        if m > WIDE {
            let learnt = std::mem::take(&mut self.learnt);
            let d = self.by_rows(&learnt, other, budget);
            self.learnt = learnt;
            return d;
        }
        self.by_columns(m, other, budget)
    }

    /// Clears what [`Distance::learn`] set, touching only the learnt word's own characters.
    fn forget(&mut self) {
        for &c in &self.learnt {
            if let Some(m) = self.ascii.get_mut(c as usize) {
                *m = 0;
            }
        }
        self.learnt.clear();
        self.other.clear();
    }

    fn positions(&self, c: char) -> u64 {
        match self.ascii.get(c as usize) {
            Some(&m) => m,
            None => self
                .other
                .iter()
                .find(|(o, _)| *o == c)
                .map_or(0, |&(_, m)| m),
        }
    }

    /// The bit-parallel distance of the learnt word, `m` characters (1 to 64), and `text`.
    ///
    /// Column `t` of the table holds `D[i][t]` for pattern prefixes `i`; it is kept as its
    /// vertical steps `D[i][t] - D[i-1][t]`, each +1 (`up`), -1 (`down`) or 0, and `D[m][t]`
    /// (`last`) is tracked on its own. Bits past `m` carry junk that only ever moves upwards,
    /// away from the bits read.
    fn by_columns(&self, m: usize, text: &[char], budget: usize) -> Option<usize> {
        debug_assert!((1..=WIDE).contains(&m));
        let top = 1u64 << (m - 1);
        let (mut up, mut down) = (!0u64, 0u64);
        let (mut zero, mut was) = (0u64, 0u64);
        let mut last = m;
        for (t, &c) in text.iter().enumerate() {
            let here = self.positions(c);
            // A swap ending at pattern position `j`: `c` is pattern character `j - 1`, the text
            // character before it is character `j`, and the step into `j - 1` on the previous
            // column's diagonal was not already free.
            let swap = ((!zero & here) << 1) & was;
            zero = ((here & up).wrapping_add(up) ^ up) | here | down | swap;
            let right_up = down | !(zero | up);
            let right_down = zero & up;
            last += usize::from(right_up & top != 0);
            last -= usize::from(right_down & top != 0);
            let right_up = (right_up << 1) | 1;
            let right_down = right_down << 1;
            up = right_down | !(zero | right_up);
            down = right_up & zero;
            was = here;
            // Each remaining character lowers the last row by at most one.
            if last > budget + (text.len() - t - 1) {
                return None;
            }
        }
        (last <= budget).then_some(last)
    }

    /// The table filled row by row, for words too long for one mask.
    fn by_rows(&mut self, a: &[char], b: &[char], budget: usize) -> Option<usize> {
        let width = b.len() + 1;
        let over = budget + 1;
        self.before.clear();
        self.before.resize(width, over);
        self.previous.clear();
        self.previous.extend(0..width);
        self.current.clear();
        self.current.resize(width, over);
        for i in 1..=a.len() {
            self.current[0] = i;
            let mut row_min = i;
            for j in 1..width {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut d = (self.previous[j] + 1)
                    .min(self.current[j - 1] + 1)
                    .min(self.previous[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    d = d.min(self.before[j - 2] + 1);
                }
                self.current[j] = d;
                row_min = row_min.min(d);
            }
            // Every later cell descends from this row (or the one before, for a swap, which
            // still costs one more edit), so the distance can only grow from its minimum.
            if row_min > budget {
                return None;
            }
            std::mem::swap(&mut self.before, &mut self.previous);
            std::mem::swap(&mut self.previous, &mut self.current);
        }
        let d = self.previous[b.len()];
        (d <= budget).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::Distance;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn one_scratch_reused_across_pairs_agrees_with_strsim(
            pairs in proptest::collection::vec(("[abé語]{0,12}", "[abé語]{0,12}", 0usize..6), 1..20)
        ) {
            // What one pair leaves in the scratch must not change the next pair's answer.
            let mut dp = Distance::default();
            for (a, b, budget) in &pairs {
                let d = strsim::osa_distance(a, b);
                let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
                prop_assert_eq!(dp.bounded(&a, &b, *budget), (d <= *budget).then_some(d));
            }
        }

        #[test]
        fn one_learnt_word_measures_to_many(
            word in "[abé語]{0,70}",
            others in proptest::collection::vec(("[abé語]{0,70}", 0usize..72), 1..10)
        ) {
            let mut dp = Distance::default();
            dp.learn(&word.chars().collect::<Vec<_>>());
            for (other, budget) in &others {
                let d = strsim::osa_distance(&word, other);
                let other: Vec<char> = other.chars().collect();
                prop_assert_eq!(dp.to(&other, *budget), (d <= *budget).then_some(d));
            }
        }
    }
}
