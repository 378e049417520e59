//! Route per task, not per call: session pinning, model affinity and continuity protection
//! (`session`, `protect` and `failure.store` of docs/language.md, "Declarations"; step 5 of
//! docs/language.md, "What happens to a request").
//!
//! Inside one agent task the intent of each call keeps changing; scoring each call alone would
//! switch models mid-task and make the new model rebuild the whole prompt cache. So the first
//! routed call of a session id pins its model, later calls follow the pin, and a proposed
//! switch runs the policy's `protect` holds first (never in the middle of a tool loop, say).
//!
//! - [`identity`]: who a call belongs to — (tenant, id), the tenant a hash of the API key;
//! - [`pin`]: what a pin records; [`store`]: where pins live (memory or Redis);
//! - [`layer`]: the switch protocol; [`protect`]: the holds, via the staged evaluator;
//! - [`local`]: this replica's copy of its pins, followed while the shared store is out;
//! - [`outcomes`]: the `POST /v1/router/outcomes` endpoint feeding `outcomes(pinned)`;
//! - [`hook`]: the layer as the proxy's [`crate::hooks::Sessions`] component.

pub mod clock;
pub mod hook;
pub mod identity;
pub mod layer;
pub mod listing;
pub mod local;
pub mod metrics;
pub mod outcomes;
pub mod pin;
pub mod protect;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use identity::{Identity, ANONYMOUS};
pub use layer::{Continuity, ContinuityInput, SessionLayer, SessionOptions, SessionState, Ticket};
pub use pin::{Pin, SwitchRecord};
pub use protect::{HoldQuery, HoldVerdict, Holds, PolicyHolds};
pub use store::{MemoryStore, RedisStore, SessionStore, StoreError, Verdict};
