//! The simulator's declared quality model: whether a simulated agent turn was *correct*, which no
//! latency or token count can say. It is simulation, not a measurement of any real model, and
//! `src eval` says so wherever it reports a result of it.
//!
//! Per served model, a turn on a clean task state is correct with probability `easy` or `hard`
//! by the turn's difficulty. A wrong turn damages the state (its mistake stays in the history),
//! and every later turn inherits it: on a damaged state the probability of a correct turn is
//! multiplied by `damaged_factor`, and a correct turn repairs the damage only with probability
//! `repair`. This is the mechanism behind late escalation failing: a capable model brought in
//! after a weak one went wrong starts from a damaged state. A task passes when its final turn
//! is correct on a clean state.
//!
//! Draws are keyed by (seed, session, turn) and not by the model, so two policies evaluated on
//! the same sessions under the same seed see the same luck (common random numbers): their
//! difference comes from which model answered, not from the dice.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::cache::fnv1a_fields;

/// One served model's quality knobs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimQuality {
    /// Probability of a correct easy turn on a clean state.
    pub easy: f64,
    /// Probability of a correct hard turn on a clean state.
    pub hard: f64,
    /// Multiplies the probability of a correct turn on a damaged state.
    pub damaged_factor: f64,
    /// Probability that a correct turn on a damaged state repairs it.
    pub repair: f64,
}

impl Default for SimQuality {
    fn default() -> SimQuality {
        SimQuality {
            easy: 0.95,
            hard: 0.75,
            damaged_factor: 0.6,
            repair: 0.3,
        }
    }
}

/// How hard a turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difficulty {
    Easy,
    Hard,
}

/// The simulated state of one task after some turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskState {
    /// A wrong turn's mistake is in the history and has not been repaired.
    pub damaged: bool,
    /// The last turn was correct.
    pub last_correct: bool,
}

impl TaskState {
    /// Whether the task passes its final check if it ends here.
    pub fn passes(self) -> bool {
        self.last_correct && !self.damaged
    }
}

impl SimQuality {
    pub(crate) fn validate(&self, owner: &str) -> Result<(), super::SimConfigError> {
        for (field, p) in [
            ("quality.easy", self.easy),
            ("quality.hard", self.hard),
            ("quality.damaged_factor", self.damaged_factor),
            ("quality.repair", self.repair),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(super::SimConfigError::Model {
                    model: owner.to_owned(),
                    field,
                    reason: "must be a probability between 0 and 1",
                });
            }
        }
        Ok(())
    }

    /// The state after turn `turn` of `session` is answered by this model (`None`: no model
    /// answered, the turn failed, which counts as wrong).
    pub fn step(
        quality: Option<&SimQuality>,
        state: TaskState,
        difficulty: Difficulty,
        seed: u64,
        session: &str,
        turn: usize,
    ) -> TaskState {
        let Some(q) = quality else {
            return TaskState {
                damaged: true,
                last_correct: false,
            };
        };
        let key = fnv1a_fields(&[
            b"quality",
            &seed.to_le_bytes(),
            session.as_bytes(),
            &(turn as u64).to_le_bytes(),
        ]);
        let mut rng = StdRng::seed_from_u64(key);
        let (correct_draw, repair_draw): (f64, f64) = (rng.random(), rng.random());
        let mut p = match difficulty {
            Difficulty::Easy => q.easy,
            Difficulty::Hard => q.hard,
        };
        if state.damaged {
            p *= q.damaged_factor;
        }
        let correct = correct_draw < p;
        let damaged = if !correct {
            true
        } else {
            state.damaged && repair_draw >= q.repair
        };
        TaskState {
            damaged,
            last_correct: correct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERFECT: SimQuality = SimQuality {
        easy: 1.0,
        hard: 1.0,
        damaged_factor: 1.0,
        repair: 1.0,
    };

    #[test]
    fn certain_models_always_pass_and_a_failed_turn_damages() {
        let clean = TaskState::default();
        let s = SimQuality::step(Some(&PERFECT), clean, Difficulty::Hard, 1, "a", 0);
        assert!(s.passes());
        let failed = SimQuality::step(None, s, Difficulty::Easy, 1, "a", 1);
        assert!(failed.damaged && !failed.passes());
        // A perfect model repairs the damage on its next turn.
        let repaired = SimQuality::step(Some(&PERFECT), failed, Difficulty::Easy, 1, "a", 2);
        assert!(repaired.passes());
    }

    #[test]
    fn damage_is_inherited_when_repair_never_happens() {
        let hopeless = SimQuality {
            repair: 0.0,
            ..PERFECT
        };
        let damaged = TaskState {
            damaged: true,
            last_correct: false,
        };
        for turn in 0..20 {
            let s = SimQuality::step(Some(&hopeless), damaged, Difficulty::Easy, 3, "b", turn);
            assert!(s.last_correct && s.damaged);
        }
    }

    #[test]
    fn draws_depend_on_seed_session_and_turn_not_on_the_model() {
        let q = SimQuality::default();
        let run = |seed: u64| -> Vec<bool> {
            (0..64)
                .map(|t| {
                    SimQuality::step(
                        Some(&q),
                        TaskState::default(),
                        Difficulty::Hard,
                        seed,
                        "s",
                        t,
                    )
                    .last_correct
                })
                .collect()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
        let rate = run(5).iter().filter(|c| **c).count() as f64 / 64.0;
        assert!((0.5..=0.95).contains(&rate), "{rate}");
    }
}
