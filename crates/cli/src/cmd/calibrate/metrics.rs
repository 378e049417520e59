//! Confusion counts and what they add up to: precision, recall, F1 and agreement.

use serde::Serialize;

/// A binary confusion count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub tp: usize,
    pub fp: usize,
    pub fn_: usize,
    pub tn: usize,
}

impl Counts {
    /// Counts `(predicted, actual)` pairs.
    pub fn of(pairs: impl IntoIterator<Item = (bool, bool)>) -> Counts {
        let mut c = Counts::default();
        for (predicted, actual) in pairs {
            match (predicted, actual) {
                (true, true) => c.tp += 1,
                (true, false) => c.fp += 1,
                (false, true) => c.fn_ += 1,
                (false, false) => c.tn += 1,
            }
        }
        c
    }

    /// 0 when nothing is predicted positive.
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    /// 0 when nothing is actually positive.
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }

    pub fn f1(&self) -> f64 {
        ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn_)
    }

    pub fn summary(&self) -> Summary {
        Summary {
            precision: round4(self.precision()),
            recall: round4(self.recall()),
            f1: round4(self.f1()),
            tp: self.tp,
            fp: self.fp,
            fn_: self.fn_,
            tn: self.tn,
        }
    }
}

/// Counts and their scores as the report shows them.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Summary {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub tp: usize,
    pub fp: usize,
    #[serde(rename = "fn")]
    pub fn_: usize,
    pub tn: usize,
}

fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// The share of pairs that agree; `None` when there are none.
pub fn agreement<T: PartialEq>(pairs: impl IntoIterator<Item = (T, T)>) -> Option<f64> {
    let (mut same, mut all) = (0usize, 0usize);
    for (a, b) in pairs {
        all += 1;
        same += usize::from(a == b);
    }
    (all > 0).then(|| same as f64 / all as f64)
}

/// Four digits: more say nothing at these sample sizes.
pub fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_counted_scores() {
        let c = Counts::of([
            (true, true),
            (true, true),
            (true, false),
            (false, true),
            (false, false),
        ]);
        assert_eq!((c.tp, c.fp, c.fn_, c.tn), (2, 1, 1, 1));
        assert!((c.precision() - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.recall() - 2.0 / 3.0).abs() < 1e-12);
        assert!((c.f1() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(Counts::of([(false, false)]).f1(), 0.0);
        assert_eq!(agreement([(1, 1), (2, 3)]), Some(0.5));
        assert_eq!(agreement(Vec::<(u8, u8)>::new()), None);
    }
}
