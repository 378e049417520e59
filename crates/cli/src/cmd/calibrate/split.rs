//! The seeded train/held-out split: thresholds are fitted on one part and judged on the other,
//! and the same seed gives the same split.

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Indices of the training and held-out rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub train: Vec<usize>,
    pub holdout: Vec<usize>,
}

/// Shuffles `0..n` with `seed` and holds out `fraction` of it (at least one row each side).
pub fn split(n: usize, fraction: f64, seed: u64) -> Result<Split> {
    if !(fraction > 0.0 && fraction < 1.0) {
        bail!("--holdout must be between 0 and 1 (exclusive), got {fraction}");
    }
    if n < 2 {
        bail!(
            "calibration needs at least two labelled requests (one to fit, one to judge), got {n}"
        );
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let held = ((n as f64 * fraction).round() as usize).clamp(1, n - 1);
    let mut holdout = order.split_off(n - held);
    order.sort_unstable();
    holdout.sort_unstable();
    Ok(Split {
        train: order,
        holdout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_partitions_and_repeats_per_seed() {
        let s = split(10, 0.3, 7).unwrap();
        assert_eq!(s.holdout.len(), 3);
        assert_eq!(s.train.len(), 7);
        let mut all: Vec<usize> = s.train.iter().chain(&s.holdout).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(split(10, 0.3, 7).unwrap(), s);
        let others: Vec<Split> = (0..8).map(|seed| split(10, 0.3, seed).unwrap()).collect();
        assert!(
            others.iter().any(|o| o != &s),
            "every seed gave the same split"
        );
    }

    #[test]
    fn degenerate_splits_are_refused() {
        assert!(split(1, 0.5, 0).is_err());
        assert!(split(10, 0.0, 0).is_err());
        assert!(split(10, 1.0, 0).is_err());
        assert_eq!(split(2, 0.01, 0).unwrap().holdout.len(), 1);
    }
}
