//! A session's recent decisions, for the console's sessions view: the last few requests of each
//! session (route, model, path, session state), kept by the router while a page watches the live
//! stream, so the view is complete since then whatever the stream's pace left out.
//!
//! Bounded twice: [`PER_SESSION`] decisions a session, [`SESSIONS`] sessions (the least recently
//! used go first). Nothing is kept while no page is connected: the request path then pays
//! nothing for it, as for the stream.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use quick_cache::sync::Cache;
use serde::Serialize;

use crate::log::RequestRecord;

/// Decisions kept per session.
pub const PER_SESSION: usize = 8;
/// Sessions kept.
pub const SESSIONS: usize = 4096;

/// One request of a session, as the sessions view lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub route: Option<String>,
    pub model: Option<String>,
    pub path: &'static str,
    pub status: u16,
    /// `x-sr-session` of the answer.
    pub session: Option<&'static str>,
}

type Decisions = Arc<Mutex<VecDeque<Decision>>>;

/// The decisions by (tenant, shown session id).
pub struct Recent {
    sessions: Cache<(String, String), Decisions>,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            sessions: Cache::new(SESSIONS),
        }
    }
}

impl Recent {
    /// Notes `record`'s decision under its session, if the record says who sent it.
    pub fn note(&self, record: &RequestRecord, at_ms: u64) {
        let Some(who) = record.watched.as_ref() else {
            return;
        };
        let Some(id) = who.session.as_ref() else {
            return;
        };
        let key = (who.tenant.clone(), id.clone());
        // One list per session even when its first two requests end together.
        let Ok(decisions) = self.sessions.get_or_insert_with(&key, || {
            Ok::<_, std::convert::Infallible>(Decisions::default())
        });
        let mut decisions = decisions.lock().unwrap_or_else(PoisonError::into_inner);
        if decisions.len() == PER_SESSION {
            decisions.pop_front();
        }
        decisions.push_back(Decision {
            at_ms,
            route: record.route.clone(),
            model: record.model.clone(),
            path: record.path,
            status: record.status,
            session: record.session,
        });
    }

    /// The session's decisions, newest first.
    pub fn of(&self, tenant: &str, id: &str) -> Vec<Decision> {
        self.sessions
            .get(&(tenant.to_owned(), id.to_owned()))
            .map(|d| {
                let d = d.lock().unwrap_or_else(PoisonError::into_inner);
                d.iter().rev().cloned().collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Who;

    fn record(tenant: &str, session: Option<&str>, route: &str) -> RequestRecord {
        RequestRecord {
            route: Some(route.into()),
            path: "upstream",
            watched: Some(Who {
                tenant: tenant.into(),
                session: session.map(str::to_owned),
                prompt_chars: 0,
                prompt: None,
            }),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn each_session_keeps_its_latest_decisions_newest_first() {
        let recent = Recent::default();
        for i in 0..(PER_SESSION as u64 + 3) {
            recent.note(&record("alice", Some("task-1"), &format!("r{i}")), i);
        }
        recent.note(&record("bob", Some("task-1"), "bobs"), 100);
        recent.note(&record("alice", None, "no session"), 101);
        let alice = recent.of("alice", "task-1");
        assert_eq!(alice.len(), PER_SESSION);
        assert_eq!(alice[0].route.as_deref(), Some("r10"));
        assert_eq!(alice[PER_SESSION - 1].route.as_deref(), Some("r3"));
        let bob = recent.of("bob", "task-1");
        assert_eq!(bob.len(), 1);
        assert_eq!(bob[0].route.as_deref(), Some("bobs"));
        assert!(recent.of("carol", "task-1").is_empty());
    }
}
