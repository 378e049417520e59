//! The one-pass candidate search: every family's candidates found by reading the text once.
//!
//! A family's candidates are what `Regex::find_iter` of its pattern yields: from a cursor, the
//! leftmost position where a match starts, the leftmost-first match there, the cursor moved to
//! its end. Both halves of that can be had without reading the text once per family:
//!
//! - *where matches start*: one lazy DFA of all the patterns, reversed and unanchored with
//!   [`MatchKind::All`], run once from the end of the text to its start, reports every
//!   position where a match of any family starts, with the family (an overlapping search);
//! - *where the match there ends*: a forward lazy DFA of all the patterns, leftmost-first with
//!   a start state per pattern, run anchored at the start for that family alone; it reads only
//!   the candidate.
//!
//! So a family's candidates are its starts in order, each taken only at or after the end of
//! the previous candidate, which is exactly `find_iter` (no pattern has a look-around, so a
//! search that begins at a start sees what a whole-text search would). The text is read once
//! by the reverse pass whatever the number of types, then only candidates are read again.
//!
//! The reverse lazy DFA gives up, as the `regex` crate's own do, when a text makes its state
//! cache thrash (few bytes searched per state built); [`Scanner::candidates`] then says so and
//! the caller falls back to searching family by family.

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson;
use regex_automata::util::pool::Pool;
use regex_automata::{Anchored, Input, MatchError, MatchKind, PatternID};
use std::ops::Range;
use std::panic::{RefUnwindSafe, UnwindSafe};

/// Why the scanner of a set of patterns cannot be built.
pub type BuildError = regex_automata::hybrid::BuildError;

/// The two lazy DFAs' caches, one pair per thread searching at once.
#[derive(Debug)]
struct Caches {
    forward: Cache,
    reverse: Cache,
}

type CachesFn = Box<dyn Fn() -> Caches + Send + Sync + UnwindSafe + RefUnwindSafe>;

/// The one-pass search over a fixed list of candidate patterns (pattern `i` is family `i`).
pub(super) struct Scanner {
    forward: DFA,
    reverse: DFA,
    caches: Pool<Caches, CachesFn>,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("patterns", &self.forward.pattern_len())
            .finish_non_exhaustive()
    }
}

impl Clone for Scanner {
    fn clone(&self) -> Scanner {
        Scanner::from_dfas(self.forward.clone(), self.reverse.clone())
    }
}

impl Scanner {
    /// The scanner of `patterns`, its lazy DFAs holding at most `cache_capacity` bytes of
    /// states each (per searching thread).
    pub(super) fn new(
        patterns: &[&str],
        cache_capacity: usize,
    ) -> Result<Scanner, Box<BuildError>> {
        // The reverse pass gives up as the `regex` crate's lazy DFAs do: after the cache has
        // been cleared three times while building a state every few bytes. The forward DFA
        // reads only candidates and never gives up, so once the reverse pass is through no
        // search can fail.
        let forward = DFA::builder()
            .configure(
                DFA::config()
                    .cache_capacity(cache_capacity)
                    .match_kind(MatchKind::LeftmostFirst)
                    .starts_for_each_pattern(true),
            )
            .build_many(patterns)
            .map_err(Box::new)?;
        let reverse = DFA::builder()
            .configure(
                DFA::config()
                    .cache_capacity(cache_capacity)
                    .minimum_cache_clear_count(Some(3))
                    .minimum_bytes_per_state(Some(10))
                    .match_kind(MatchKind::All),
            )
            .thompson(thompson::Config::new().reverse(true))
            .build_many(patterns)
            .map_err(Box::new)?;
        Ok(Scanner::from_dfas(forward, reverse))
    }

    fn from_dfas(forward: DFA, reverse: DFA) -> Scanner {
        let (f, r) = (forward.clone(), reverse.clone());
        let create: CachesFn = Box::new(move || Caches {
            forward: f.create_cache(),
            reverse: r.create_cache(),
        });
        Scanner {
            forward,
            reverse,
            caches: Pool::new(create),
        }
    }

    /// Calls `sink(family, candidate)` with every family's candidates, family by family and
    /// in order within one, until it returns `true`; the same calls, in the same order, as
    /// `find_iter` of each family's pattern would give. An error means the reverse pass gave
    /// up, before any call was made.
    pub(super) fn candidates(
        &self,
        text: &str,
        sink: &mut dyn FnMut(usize, Range<usize>) -> bool,
    ) -> Result<(), MatchError> {
        let mut caches = self.caches.get();
        let starts = self.starts(&mut caches.reverse, text)?;
        let mut family = usize::MAX;
        let mut cursor = 0;
        for (pattern, at) in starts {
            if pattern != family {
                family = pattern;
                cursor = 0;
            }
            if at < cursor {
                continue;
            }
            let input = Input::new(text)
                .range(at..)
                .anchored(Anchored::Pattern(PatternID::new_unchecked(pattern)));
            // A start the reverse pass reported always has a match there.
            let Some(end) = self
                .forward
                .try_search_fwd(&mut caches.forward, &input)?
                .map(|m| m.offset())
            else {
                continue;
            };
            cursor = end;
            if sink(pattern, at..end) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Every `(family, position)` where a match of the family's pattern starts, ordered by
    /// family then position: one reverse pass over the text.
    ///
    /// The loop is the lazy DFA's own overlapping reverse search, written out because that one
    /// reports the second and later patterns matching at a position one byte early (it leaves
    /// out the delay of a DFA's matches by one byte that it applies to the first).
    fn starts(&self, cache: &mut Cache, text: &str) -> Result<Vec<(usize, usize)>, MatchError> {
        let dfa = &self.reverse;
        let bytes = text.as_bytes();
        let mut starts = Vec::new();
        let mut push = |cache: &Cache, sid: LazyStateID, at: usize| {
            for i in 0..dfa.match_len(cache, sid) {
                starts.push((dfa.match_pattern(cache, sid, i).as_usize(), at));
            }
        };
        let mut sid = dfa.start_state_reverse(cache, &Input::new(text))?;
        let mut at = bytes.len();
        cache.search_start(at);
        while at > 0 {
            at -= 1;
            let byte = bytes[at];
            // The common step, a transition already built out of an ordinary state, reads one
            // table entry; the rest (building a state, leaving a match state) is the DFA's.
            let known = (!sid.is_tagged())
                .then(|| dfa.next_state_untagged(cache, sid, byte))
                .filter(|next| !next.is_unknown());
            sid = match known {
                Some(next) => next,
                None => {
                    cache.search_update(at);
                    dfa.next_state(cache, sid, byte)
                        .map_err(|_| MatchError::gave_up(at))?
                }
            };
            if !sid.is_tagged() {
                continue;
            }
            if sid.is_match() {
                // A DFA's matches are delayed by one byte: these start after `at`.
                push(cache, sid, at + 1);
            } else if sid.is_dead() {
                break;
            } else if sid.is_quit() {
                return Err(MatchError::quit(byte, at));
            }
        }
        if !sid.is_dead() {
            sid = dfa
                .next_eoi_state(cache, sid)
                .map_err(|_| MatchError::gave_up(0))?;
            if sid.is_match() {
                push(cache, sid, 0);
            }
        }
        cache.search_finish(0);
        starts.sort_unstable();
        Ok(starts)
    }
}
