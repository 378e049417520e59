//! Cost-matched static baselines: the same share of requests sent to each destination as the
//! policy sent them, chosen by prompt length alone, or at random.
//!
//! If a semantic policy agrees with the labels no better than its share of traffic handed out
//! by length, its models are not earning their cost.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

/// Random draws averaged for the random baseline's expected agreement.
pub const RANDOM_DRAWS: usize = 1000;

/// Hands out `decided` (one destination per request, as the policy chose) again by length: the
/// longest prompts go to the destination ranked first by `rank` (the dearest model), as many
/// as the policy sent there, the next longest to the next, and so on. Ties in length keep
/// request order.
pub fn by_length<D: Clone + Ord>(
    lengths: &[usize],
    decided: &[D],
    rank: impl Fn(&D) -> f64,
) -> Vec<D> {
    let mut shares: Vec<(D, usize)> = Vec::new();
    let mut sorted = decided.to_vec();
    sorted.sort();
    for d in sorted {
        match shares.last_mut() {
            Some((last, n)) if *last == d => *n += 1,
            _ => shares.push((d, 1)),
        }
    }
    shares.sort_by(|a, b| {
        rank(&b.0)
            .total_cmp(&rank(&a.0))
            .then_with(|| a.0.cmp(&b.0))
    });
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]).then(a.cmp(&b)));
    let mut out: Vec<Option<D>> = vec![None; lengths.len()];
    let mut next = order.into_iter();
    for (d, n) in shares {
        for i in next.by_ref().take(n) {
            out[i] = Some(d.clone());
        }
    }
    out.into_iter()
        .zip(decided)
        .map(|(o, d)| o.unwrap_or_else(|| d.clone()))
        .collect()
}

/// The mean agreement with `truth` of [`RANDOM_DRAWS`] seeded shuffles of `decided` (the same
/// shares, handed out at random).
pub fn random_agreement<D: Clone + PartialEq>(
    decided: &[D],
    truth: &[D],
    seed: u64,
) -> Option<f64> {
    if decided.is_empty() || decided.len() != truth.len() {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6261_7365_6c69_6e65);
    let mut draw = decided.to_vec();
    let mut total = 0usize;
    for _ in 0..RANDOM_DRAWS {
        draw.shuffle(&mut rng);
        total += draw.iter().zip(truth).filter(|(a, b)| a == b).count();
    }
    Some(total as f64 / (RANDOM_DRAWS * decided.len()) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prompts_go_to_the_dearest_model_in_the_policys_share() {
        // The policy sent two requests to `big` (cost 1) and three to `small` (cost 0.1).
        let decided = ["small", "big", "small", "big", "small"];
        let lengths = [10, 500, 40, 30, 900];
        let cost = |d: &&str| if *d == "big" { 1.0 } else { 0.1 };
        let out = by_length(&lengths, &decided, cost);
        assert_eq!(out, ["small", "big", "small", "small", "big"]);
        assert_eq!(out.iter().filter(|d| **d == "big").count(), 2);
    }

    #[test]
    fn random_shares_agree_as_often_as_chance_says() {
        // Half the truth is `a`; the policy sends half to `a`: chance agreement is 0.5.
        let decided = ["a", "a", "b", "b", "a", "b", "a", "b"];
        let truth = ["a", "b", "a", "b", "b", "a", "a", "b"];
        let mean = random_agreement(&decided, &truth, 3).unwrap();
        assert!((mean - 0.5).abs() < 0.03, "{mean}");
        assert_eq!(random_agreement(&decided, &truth, 3), Some(mean));
        // Everything to one destination: the shuffle cannot change anything.
        assert_eq!(
            random_agreement(&["a"; 4], &["a", "a", "b", "b"], 1),
            Some(0.5)
        );
    }
}
