//! The cover search: the conjunctions of the routes tried so far, indexed so that those which may
//! imply a new conjunction are found without looking at all of them, and the bounded search for
//! one earlier conjunction, or several together, that takes every request a new one matches.

use super::algebra::{implies, merge, Conjunct, Domains, Key, Merged};
use super::MAX_CANDIDATES;
use std::collections::HashMap;

/// What one conjunction's search for covering routes may still spend.
pub(super) struct Budget {
    pub(super) pieces: usize,
    pub(super) overlaps: usize,
}

/// Earlier routes' conjunctions, indexed by their smallest key.
#[derive(Default)]
pub(super) struct Pool {
    conjuncts: Vec<(Conjunct, usize)>,
    by_key: HashMap<Key, Vec<usize>>,
    /// Every conjunction constraining each key (split candidates).
    by_any_key: HashMap<Key, Vec<usize>>,
    /// Conjunctions of one atom (split candidates for `true`).
    singles: Vec<usize>,
    /// An earlier route whose condition has the conjunction `true`.
    always: Option<usize>,
}

impl Pool {
    pub(super) fn add(&mut self, c: Conjunct, route: usize) {
        match c.first() {
            None => {
                self.always.get_or_insert(route);
            }
            Some((k, _)) => {
                let id = self.conjuncts.len();
                self.by_key.entry(*k).or_default().push(id);
                for (k, _) in &c {
                    self.by_any_key.entry(*k).or_default().push(id);
                }
                if c.len() == 1 {
                    self.singles.push(id);
                }
                self.conjuncts.push((c, route));
            }
        }
    }

    /// An earlier route with a conjunction implied by `c`, if one is found within the bound.
    fn cover(&self, c: &Conjunct) -> Option<usize> {
        if self.always.is_some() {
            return self.always;
        }
        let mut examined = 0;
        for (k, _) in c {
            for &i in self.by_key.get(k).into_iter().flatten() {
                examined += 1;
                if examined > MAX_CANDIDATES {
                    return None;
                }
                let (a, route) = &self.conjuncts[i];
                if implies(c, a) {
                    return Some(*route);
                }
            }
        }
        None
    }

    /// Whether earlier conjunctions together imply `c` (see the module comment), adding the
    /// routes that do to `routes`.
    pub(super) fn cover_together(
        &self,
        c: &Conjunct,
        domains: &Domains,
        budget: &mut Budget,
        routes: &mut Vec<usize>,
    ) -> bool {
        if let Some(r) = self.cover(c) {
            if !routes.contains(&r) {
                routes.push(r);
            }
            return true;
        }
        if budget.pieces == 0 {
            return false;
        }
        budget.pieces -= 1;
        // An earlier conjunction that `c` meets in every constraint but one: the part of `c`
        // inside that constraint is implied by it, and only the parts outside are left.
        let candidates: Box<dyn Iterator<Item = &usize>> = if c.is_empty() {
            Box::new(self.singles.iter())
        } else {
            Box::new(
                c.iter()
                    .flat_map(|(k, _)| self.by_any_key.get(k).into_iter().flatten()),
            )
        };
        let mut split = None;
        for &i in candidates {
            if budget.overlaps == 0 {
                return false;
            }
            budget.overlaps -= 1;
            let Some((a, route)) = self.conjuncts.get(i) else {
                continue;
            };
            let mut unmet = a.iter().filter(|(k, ca)| {
                !c.iter()
                    .find(|(kc, _)| kc == k)
                    .is_some_and(|(_, cc)| cc.within(ca))
            });
            if let (Some(one), None) = (unmet.next(), unmet.next()) {
                if matches!(merge(c, &vec![one.clone()]), Merged::Sat(_)) {
                    split = Some((one.clone(), *route));
                    break;
                }
            }
        }
        let Some(((key, inside), route)) = split else {
            return false;
        };
        let Some(outside) = inside.complement(key, domains) else {
            return false;
        };
        if !routes.contains(&route) {
            routes.push(route);
        }
        for part in outside {
            match merge(c, &vec![(key, part)]) {
                Merged::Unsat => {}
                Merged::Unknown => return false,
                Merged::Sat(piece) => {
                    if !self.cover_together(&piece, domains, budget, routes) {
                        return false;
                    }
                }
            }
        }
        true
    }
}
