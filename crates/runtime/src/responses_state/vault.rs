//! A redacting route's vault, kept along a `/v1/responses` chain whose state only the backend
//! holds.
//!
//! The backend keeps a conversation it stored with the placeholders it was sent (`<EMAIL_1>`),
//! so a turn continuing it must give the same value the same placeholder, and a new value the
//! next number, or an answer naming an earlier turn's placeholder would be restored to another
//! value. When a redacting route relays a Responses answer, the request's vault is kept, sealed
//! ([`super::seal`]), under the answer's response id in the tenant's response store (memory or
//! Redis, the responses' bounds and time to live); a later turn whose `previous_response_id`
//! names it starts from that vault ([`find`]) and its own answer keeps the extended vault under
//! the new id. A tenant reads only its own vaults, and a vault opens only under the (tenant,
//! id) it was sealed for. A turn whose vault is gone is refused on a redacting route
//! ([`crate::pipeline::continuation::ChainVault::start`]).
//!
//! A turn continuing a response the router stored looks its vault up too, and carries it when
//! found: the owner is sent that turn as written, and its copy of the conversation holds the
//! placeholders earlier turns were sent. None found refuses nothing there: a redacting route sends
//! a stored conversation expanded, and may number it afresh.
//!
//! On a policy that redacts anywhere, every relayed Responses answer keeps a vault, even one a
//! route without `redact` made: empty when its chain starts there (no placeholder was sent),
//! the chain's own when it carries one. So a chain whose first turns went to routes
//! that do not redact still has a vault when a redacting route meets it, and "no vault" means
//! only one lost (expired, evicted, another key, another tenant) or a chain started elsewhere. A
//! policy that redacts nowhere does no vault work at all.

use std::sync::Arc;

use src_compiler::hir::{CheckedPolicy, StoreDef};
use src_compiler::pii::Vault;

use crate::pipeline::continuation::ChainVault;
use crate::responses_state::seal::VaultKey;
use crate::responses_state::{ResponseStates, Scope};
use crate::store::clock::Clock;

/// Whether any route or block of `policy` redacts (only then are chains' vaults looked up).
pub fn redacts(policy: &CheckedPolicy) -> bool {
    policy.routes.iter().any(|r| r.redact.is_some())
        || policy.blocks.iter().any(|b| b.redact.is_some())
}

/// Whether `policy` redacts and keeps its responses (so its vaults) in a store several routers
/// share, which then must all seal with one key given by the operator.
pub fn shared(policy: &CheckedPolicy) -> bool {
    let shared = policy
        .session
        .as_ref()
        .is_some_and(|s| !matches!(s.store, StoreDef::Memory));
    shared && redacts(policy)
}

/// The vault kept under the response `previous` for the tenant of `scope` (`None`: the tenant
/// has no store, so nothing was kept); a store that fails or bytes that do not open count as
/// lost, said in the log.
pub async fn find(states: &ResponseStates, scope: Option<&Scope>, previous: &str) -> ChainVault {
    let lost = || ChainVault::Lost {
        previous: previous.to_owned(),
    };
    let (Some(scope), Some(key)) = (scope, states.vault_key()) else {
        states.count_vault("missing");
        return lost();
    };
    match scope
        .vaults
        .get(&scope.tenant, previous, states.now_ms())
        .await
    {
        Ok(Some(sealed)) => match key.open(&scope.tenant, previous, &sealed) {
            Some(vault) => {
                states.count_vault("found");
                ChainVault::Found(Arc::new(vault))
            }
            None => {
                states.count_vault("unopened");
                tracing::warn!(
                    previous,
                    supplied = key.supplied(),
                    "a chain's vault does not open with this router's key (SRC_VAULT_KEY_FILE)"
                );
                lost()
            }
        },
        Ok(None) => {
            states.count_vault("missing");
            lost()
        }
        Err(err) => {
            states.count_vault("failed");
            tracing::warn!(%err, store = scope.vaults.kind(), previous, "cannot read a chain's vault");
            lost()
        }
    }
}

/// What keeping a relayed answer's vault needs besides the answer.
pub struct KeepVault {
    pub scope: Scope,
    pub key: Arc<VaultKey>,
    /// The request's own: the one a redacting route numbered with, the chain's vault a turn
    /// carried on, or an empty one where the chain starts at this turn.
    pub vault: Arc<Vault>,
    pub ttl_ms: u64,
    pub clock: Arc<dyn Clock>,
}

impl KeepVault {
    /// Keeps the vault under the response id `id`.
    pub async fn store(self, id: &str) {
        let scope = &self.scope;
        let Some(sealed) = self.key.seal(&scope.tenant, id, &self.vault) else {
            tracing::warn!(id, "cannot seal a chain's vault: the random source failed");
            return;
        };
        let now = self.clock.now_ms();
        if let Err(err) = scope
            .vaults
            .put(&scope.tenant, id, sealed, now, self.ttl_ms)
            .await
        {
            if err.is_outage() {
                tracing::debug!(%err, store = scope.vaults.kind(), id, "cannot keep a chain's vault");
            } else {
                tracing::warn!(%err, store = scope.vaults.kind(), id, "cannot keep a chain's vault");
            }
        }
    }
}
