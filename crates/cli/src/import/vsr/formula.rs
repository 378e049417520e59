//! Boolean formulas read off a truth table, in `.sr` syntax. A projection's band holds on a set
//! of combinations of its inputs; each input is a signal that holds or not, or a count (how
//! many of a keyword rule's keywords match, 0 to N). The table lists the band on every
//! combination, and the formula is built by splitting on one input at a time (Shannon
//! expansion), first the inputs that move the score most, merging the counts whose
//! sub-tables agree into ranges (`hits >= 2`).

/// A boolean formula over the inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Formula {
    True,
    False,
    /// Input `i` holds (`true`) or does not (`false`).
    Var(usize, bool),
    /// Counted input `i` lies in `lo..=hi` (`None`: no upper bound).
    Range(usize, usize, Option<usize>),
    And(Vec<Formula>),
    Or(Vec<Formula>),
}

impl Formula {
    fn and(a: Formula, b: Formula) -> Formula {
        match (a, b) {
            (Formula::False, _) | (_, Formula::False) => Formula::False,
            (Formula::True, x) | (x, Formula::True) => x,
            (Formula::And(mut xs), Formula::And(ys)) => {
                xs.extend(ys);
                Formula::And(xs)
            }
            (Formula::And(mut xs), y) => {
                xs.push(y);
                Formula::And(xs)
            }
            (x, Formula::And(mut ys)) => {
                ys.insert(0, x);
                Formula::And(ys)
            }
            (x, y) => Formula::And(vec![x, y]),
        }
    }

    fn or(a: Formula, b: Formula) -> Formula {
        match (a, b) {
            (Formula::True, _) | (_, Formula::True) => Formula::True,
            (Formula::False, x) | (x, Formula::False) => x,
            (Formula::Or(mut xs), Formula::Or(ys)) => {
                xs.extend(ys);
                Formula::Or(xs)
            }
            (Formula::Or(mut xs), y) => {
                xs.push(y);
                Formula::Or(xs)
            }
            (x, Formula::Or(mut ys)) => {
                ys.insert(0, x);
                Formula::Or(ys)
            }
            (x, y) => Formula::Or(vec![x, y]),
        }
    }

    /// The formula's value where input `i` is in state `states[i]` (0 or 1 for a signal, the
    /// count for a counted input).
    #[cfg(test)]
    pub fn eval(&self, states: &[usize]) -> bool {
        match self {
            Formula::True => true,
            Formula::False => false,
            Formula::Var(i, held) => (states[*i] == 1) == *held,
            Formula::Range(i, lo, hi) => states[*i] >= *lo && hi.is_none_or(|h| states[*i] <= h),
            Formula::And(xs) => xs.iter().all(|x| x.eval(states)),
            Formula::Or(xs) => xs.iter().any(|x| x.eval(states)),
        }
    }

    /// `.sr` text, with `names[i]` for input `i` (a boolean signal, or an int signal counting).
    pub fn render(&self, names: &[String]) -> String {
        match self {
            Formula::True => "true".into(),
            Formula::False => "false".into(),
            Formula::Var(i, true) => names[*i].clone(),
            Formula::Var(i, false) => format!("not {}", names[*i]),
            Formula::Range(i, lo, hi) => {
                let n = &names[*i];
                match hi {
                    None => format!("{n} >= {lo}"),
                    Some(h) if h == lo => format!("{n} == {lo}"),
                    Some(h) if *lo == 0 => format!("{n} <= {h}"),
                    Some(h) => format!("{n} >= {lo} and {n} <= {h}"),
                }
            }
            Formula::And(xs) => xs
                .iter()
                .map(|x| match x {
                    Formula::Or(_) => format!("({})", x.render(names)),
                    _ => x.render(names),
                })
                .collect::<Vec<_>>()
                .join(" and "),
            Formula::Or(xs) => xs
                .iter()
                .map(|x| x.render(names))
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }
}

/// The formula equal to `table`. Input `i` has `cards[i]` states (2 for a signal, N + 1 for a
/// count of N keywords); entry `Σ state_i × Π_{j<i} cards[j]` of the table is the band where
/// input `i` is in `state_i`. It splits on the inputs in `order`, first the first.
pub fn formula(table: &[bool], cards: &[usize], order: &[usize]) -> Formula {
    // Re-index the table so that the first input to split on is the most significant digit.
    let mut sorted = vec![false; table.len()];
    for (m, value) in table.iter().enumerate() {
        let mut rest = m;
        let mut states = vec![0usize; cards.len()];
        for (i, c) in cards.iter().enumerate() {
            states[i] = rest % c;
            rest /= c;
        }
        let mut k = 0usize;
        for var in order {
            k = k * cards[*var] + states[*var];
        }
        sorted[k] = *value;
    }
    split(&sorted, cards, order)
}

/// Shannon expansion of `table` on `order[0]` (its most significant digit), then the rest.
fn split(table: &[bool], cards: &[usize], order: &[usize]) -> Formula {
    if table.iter().all(|v| *v) {
        return Formula::True;
    }
    if !table.iter().any(|v| *v) {
        return Formula::False;
    }
    let var = order[0];
    let rest = &order[1..];
    let card = cards[var];
    let parts: Vec<&[bool]> = table.chunks(table.len() / card).collect();
    if parts.iter().all(|p| *p == parts[0]) {
        return split(parts[0], cards, rest);
    }
    if card == 2 {
        let (without, with) = (parts[0], parts[1]);
        let f0 = split(without, cards, rest);
        let f1 = split(with, cards, rest);
        let holds = Formula::Var(var, true);
        let not = Formula::Var(var, false);
        let implies = |a: &[bool], b: &[bool]| a.iter().zip(b).all(|(x, y)| !x || *y);
        return if implies(without, with) {
            // Monotone in this input: it and what it adds, or what holds without it.
            Formula::or(Formula::and(holds, f1), f0)
        } else if implies(with, without) {
            Formula::or(f1, Formula::and(not, f0))
        } else {
            Formula::or(Formula::and(holds, f1), Formula::and(not, f0))
        };
    }
    // A count: runs of counts whose sub-tables agree become ranges. Where more (or fewer)
    // keywords never turn the band off, each run needs only its lower (upper) bound.
    let implies = |a: &[bool], b: &[bool]| a.iter().zip(b).all(|(x, y)| !x || *y);
    let rising = parts.windows(2).all(|w| implies(w[0], w[1]));
    let falling = parts.windows(2).all(|w| implies(w[1], w[0]));
    let mut runs = Vec::new();
    let mut start = 0;
    while start < card {
        let mut end = start;
        while end + 1 < card && parts[end + 1] == parts[start] {
            end += 1;
        }
        runs.push((start, end));
        start = end + 1;
    }
    let mut out = Formula::False;
    for (start, end) in runs {
        let f = split(parts[start], cards, rest);
        let range = if rising {
            (start > 0).then_some(Formula::Range(var, start, None))
        } else if falling {
            (end + 1 < card).then_some(Formula::Range(var, 0, Some(end)))
        } else {
            Some(Formula::Range(var, start, (end + 1 < card).then_some(end)))
        };
        let term = match range {
            Some(r) => Formula::and(r, f),
            None => f,
        };
        out = Formula::or(out, term);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination of states for `cards`, as state vectors.
    fn combinations(cards: &[usize]) -> Vec<Vec<usize>> {
        let total: usize = cards.iter().product();
        (0..total)
            .map(|mut m| {
                cards
                    .iter()
                    .map(|c| {
                        let s = m % c;
                        m /= c;
                        s
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn formulas_equal_their_tables_on_every_combination() {
        // Two signals and a count of 0..=3, against a threshold of a weighted sum.
        let cards = [2, 4, 2];
        let weights = [0.3, 0.15, -0.2];
        let all = combinations(&cards);
        for threshold in [0.0, 0.2, 0.35, 0.5] {
            let table: Vec<bool> = all
                .iter()
                .map(|s| {
                    let sum: f64 = s.iter().zip(weights).map(|(v, w)| *v as f64 * w).sum();
                    sum >= threshold
                })
                .collect();
            for order in [[0, 1, 2], [1, 0, 2], [2, 1, 0]] {
                let f = formula(&table, &cards, &order);
                for (s, expected) in all.iter().zip(&table) {
                    assert_eq!(f.eval(s), *expected, "{s:?} at {threshold}: {f:?}");
                }
            }
        }
    }

    #[test]
    fn formulas_read_as_the_sum_does() {
        let names = ["a".to_string(), "b".to_string(), "k".to_string()];
        let and = formula(&[false, false, false, true], &[2, 2], &[0, 1]);
        assert_eq!(and.render(&names), "a and b");
        let or = formula(&[false, true, true, true], &[2, 2], &[0, 1]);
        assert_eq!(or.render(&names), "a or b");
        let none = formula(&[true, false, false, false], &[2, 2], &[0, 1]);
        assert_eq!(none.render(&names), "not a and not b");
        // A count of 0..=3 that must reach 2, or 1 with `a`.
        let cards = [2, 2, 4];
        let table: Vec<bool> = combinations(&cards)
            .iter()
            .map(|s| s[2] >= 2 || (s[2] == 1 && s[0] == 1))
            .collect();
        let f = formula(&table, &cards, &[2, 0, 1]);
        assert_eq!(f.render(&names), "k >= 1 and a or k >= 2");
    }
}
