//! The few statistics `src eval` reports: a mean, a nearest-rank percentile, and a paired
//! bootstrap interval for a difference of means. The bootstrap draws from a generator seeded by
//! the run's seed, so the same seed gives the same interval.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Bootstrap resamples; enough for a stable 95 % interval on a few hundred sessions.
pub const RESAMPLES: usize = 2000;

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The nearest-rank percentile `p` (0 to 100) of `values`.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// A 95 % percentile-bootstrap interval of the mean of paired differences `diffs` (one per
/// session: this arm's outcome minus the baseline's on the same session).
pub fn bootstrap_ci(diffs: &[f64], seed: u64) -> Option<(f64, f64)> {
    if diffs.is_empty() {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x626f_6f74_7374_7270);
    let n = diffs.len();
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| diffs[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * RESAMPLES as f64) as usize).min(RESAMPLES - 1)];
    Some((at(0.025), at(0.975)))
}

/// Rounds for the report: the digits beyond say nothing at these sample sizes.
pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_and_percentiles() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&values, 95.0), Some(19.0));
        assert_eq!(percentile(&values, 100.0), Some(20.0));
        assert_eq!(percentile(&[4.0], 95.0), Some(4.0));
    }

    #[test]
    fn the_interval_covers_the_mean_and_repeats_per_seed() {
        let diffs = [0.0, 1.0, 0.0, -1.0, 1.0, 1.0, 0.0, 0.0];
        let (lo, hi) = bootstrap_ci(&diffs, 3).unwrap();
        assert!(lo <= 0.25 && 0.25 <= hi, "{lo} {hi}");
        assert_eq!(bootstrap_ci(&diffs, 3), Some((lo, hi)));
        assert_eq!(bootstrap_ci(&[0.0; 5], 1), Some((0.0, 0.0)));
    }
}
