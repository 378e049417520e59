//! The optimal-string-alignment distance of two words, with a budget past which it gives up.

/// Distance rows, kept between calls so that comparing words allocates nothing once warm.
#[derive(Default)]
pub(super) struct Distance {
    before: Vec<usize>,
    previous: Vec<usize>,
    current: Vec<usize>,
}

impl Distance {
    /// The distance of `a` and `b`, or `None` when it exceeds `budget`.
    pub(super) fn bounded(&mut self, a: &[char], b: &[char], budget: usize) -> Option<usize> {
        if a.len().abs_diff(b.len()) > budget {
            return None;
        }
        if a == b {
            return Some(0);
        }
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
