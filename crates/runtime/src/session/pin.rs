//! A pin: which model a session is bound to, since when, and how it got there.
//!
//! Pins name models and routes by their policy *names*, not by index: a reload may reorder the
//! models, and several router replicas on different policy generations may share one store. A
//! pin whose model the serving policy no longer declares is treated as stale.

/// How many switches a pin remembers (the oldest are dropped first).
pub const HISTORY_LIMIT: usize = 16;

/// One change of a pin's model.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SwitchRecord {
    pub from: String,
    pub to: String,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The `hold` that would have kept the pin, when `protect` observed instead of enforcing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<String>,
}

/// A session's binding to a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub model: String,
    /// The route that proposed the model (`None` when the client named the model).
    pub route: Option<String>,
    /// Calls seen while this pin was live, the creating call included.
    pub turns: u64,
    pub created_ms: u64,
    pub seen_ms: u64,
    /// Most recent last; at most [`HISTORY_LIMIT`] entries.
    pub history: Vec<SwitchRecord>,
    /// Bumped by every write that changes the model (creation is version 1); compare-and-set
    /// writes name the version they read.
    pub version: u64,
}

impl Pin {
    /// A first pin, created by the call at `now_ms`.
    pub fn first(model: &str, route: Option<&str>, now_ms: u64) -> Pin {
        Pin {
            model: model.to_owned(),
            route: route.map(str::to_owned),
            turns: 1,
            created_ms: now_ms,
            seen_ms: now_ms,
            history: Vec::new(),
            version: 1,
        }
    }

    /// Whether the pin has been idle for `ttl_ms` or longer at `now_ms`.
    pub fn is_stale(&self, now_ms: u64, ttl_ms: u64) -> bool {
        now_ms >= self.seen_ms.saturating_add(ttl_ms)
    }

    /// What a live pin looks like after the call at `now_ms` touched it.
    pub fn touched(mut self, now_ms: u64) -> Pin {
        self.turns = self.turns.saturating_add(1);
        self.seen_ms = self.seen_ms.max(now_ms);
        self
    }

    /// The pin after switching to `model` (the turn was already counted by the touch).
    pub fn switched(
        &self,
        model: &str,
        route: Option<&str>,
        now_ms: u64,
        observed: Option<&str>,
    ) -> Pin {
        let mut history = self.history.clone();
        history.push(SwitchRecord {
            from: self.model.clone(),
            to: model.to_owned(),
            at_ms: now_ms,
            observed: observed.map(str::to_owned),
        });
        if history.len() > HISTORY_LIMIT {
            history.drain(..history.len() - HISTORY_LIMIT);
        }
        Pin {
            model: model.to_owned(),
            route: route.map(str::to_owned),
            turns: self.turns,
            created_ms: self.created_ms,
            seen_ms: now_ms.max(self.seen_ms),
            history,
            version: self.version.saturating_add(1),
        }
    }

    /// A fresh pin replacing a stale one: a new life, but the version keeps counting so a
    /// compare-and-set against the stale pin's version still detects concurrent writers.
    pub fn renewed(&self, model: &str, route: Option<&str>, now_ms: u64) -> Pin {
        Pin {
            version: self.version.saturating_add(1),
            ..Pin::first(model, route, now_ms)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staleness_starts_exactly_at_the_ttl() {
        let pin = Pin::first("small", None, 1_000);
        assert!(!pin.is_stale(1_999, 1_000));
        assert!(pin.is_stale(2_000, 1_000));
        assert!(!pin.clone().touched(1_500).is_stale(2_000, 1_000));
    }

    #[test]
    fn history_keeps_the_latest_switches_only() {
        let mut pin = Pin::first("m0", None, 0);
        for i in 1..=(HISTORY_LIMIT as u64 + 3) {
            pin = pin.switched(&format!("m{i}"), Some("r"), i, None);
        }
        assert_eq!(pin.history.len(), HISTORY_LIMIT);
        assert_eq!(
            pin.history.last().map(|s| s.to.as_str()),
            Some(pin.model.as_str())
        );
        assert_eq!(pin.history[0].from, "m3");
        assert_eq!(pin.version, HISTORY_LIMIT as u64 + 4);
    }

    #[test]
    fn renewal_starts_a_new_life_with_a_higher_version() {
        let old = Pin::first("small", None, 0).switched("strong", None, 5, None);
        let new = old.renewed("small", Some("default"), 100);
        assert_eq!((new.turns, new.created_ms, new.history.len()), (1, 100, 0));
        assert!(new.version > old.version);
    }
}
