//! Every diagnostic code, in one table.
//!
//! Codes are stable: tools and CI scripts match on them, and `docs/diagnostics.md` documents each
//! one with a failing example and its fix (a test keeps the two in step). Errors are `E0xx`,
//! warnings `W0xx`. `E090` is an internal error: a bug of this tool found by its own checks, which
//! no policy is meant to provoke. Never reuse or renumber a code; retire it instead.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Code(pub &'static str);

impl Code {
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

macro_rules! codes {
    ($($name:ident = $code:literal : $title:literal;)*) => {
        $(pub const $name: Code = Code($code);)*
        /// `(code, one-line title)` for every code.
        pub const ALL: &[(Code, &str)] = &[$(($name, $title)),*];
    };
}

codes! {
    // Syntax and structure (parser).
    SYNTAX = "E001": "syntax error";
    UNKNOWN_FIELD = "E002": "unknown field in a declaration";
    DUPLICATE_FIELD = "E003": "field given twice";
    MISSING_FIELD = "E004": "required field missing";
    INVALID_FIELD_VALUE = "E005": "field value of the wrong form";
    INVALID_LITERAL = "E006": "invalid number, duration or string escape";
    // Names.
    DUPLICATE_NAME = "E010": "name declared twice";
    UNKNOWN_NAME = "E011": "unknown name";
    DUPLICATE_SECTION = "E012": "`cache`, `session`, `protect`, `failure` or `router` declared twice";
    WRONG_KIND = "E013": "name refers to the wrong kind of declaration";
    SIGNAL_CYCLE = "E014": "signals depend on each other in a cycle";
    RESERVED_NAME = "E015": "declaration uses a builtin name";
    // Types.
    TYPE_MISMATCH = "E020": "expression has the wrong type";
    WRONG_ARGUMENTS = "E021": "builtin called with the wrong number or kind of arguments";
    UNKNOWN_LABEL = "E022": "label not in the classifier's label set";
    SCORE_RANGE = "E023": "score literal outside [0, 1]";
    INVALID_REGEX = "E024": "regular expression does not compile";
    PROTECT_ONLY = "E025": "`pinned`, `proposed` or `outcomes` used outside `protect`";
    UNKNOWN_FUNCTION = "E026": "call of something that is not a builtin, classifier or guard";
    FUZZY_THRESHOLD = "E027": "`fuzzy` threshold that is not a number literal in (0, 1]";
    // Routes.
    DUPLICATE_PRIORITY = "E030": "two routes share a priority";
    NO_DEFAULT_ROUTE = "E031": "no default route";
    MULTIPLE_DEFAULT_ROUTES = "E032": "more than one default route";
    MISSING_PRIORITY = "E033": "route with `when` but no `priority`";
    INVALID_PRIORITY = "E034": "priority that is not a non-negative integer";
    // Deployment data.
    CATALOG_MISSING_MODEL = "E040": "served id absent from the backend's catalog";
    CATALOG_UNREADABLE = "E041": "catalog file missing or not a `/v1/models` answer";
    LABELS_MISMATCH = "E042": "classifier labels differ from the model's `id2label`";
    MODEL_CONFIG_UNREADABLE = "E043": "model directory's `config.json` cannot be read";
    DUPLICATE_ALIAS = "E044": "alias or router name used twice";
    INVALID_VALUE = "E045": "value out of range (status code, ttl, cost, context)";
    INVALID_STORE_URL = "E046": "`redis(..)` store URL the Redis client cannot open";
    INVALID_BACKEND_URL = "E047": "backend `url` that is not an absolute http or https URL";
    INVALID_SERVED_ID = "E048": "served id that is empty or cannot be sent in a header";
    INVALID_HEADER = "E049": "route header that is not a valid HTTP header";
    // Tests.
    TEST_MISSING_GIVEN = "E050": "test reaches a model-backed signal without a `given`";
    TEST_BAD_GIVEN = "E051": "`given` value does not fit the signal's type";
    TEST_MESSAGES_UNREADABLE = "E052": "test `messages` file missing or not a chat request";
    // Runtime (`src serve` refusing a policy it cannot run).
    MODEL_UNAVAILABLE = "E060": "classifier, guard, encoder or detector the server cannot run";
    // Redis topologies (`redis_cluster(..)`, `redis_sentinel(..)`).
    EMPTY_STORE_NODES = "E070": "`redis_cluster` or `redis_sentinel` store listing no node";
    INVALID_STORE_NODE = "E071": "cluster or sentinel node URL the Redis client cannot use";
    SENTINEL_MASTER_MISSING = "E072": "`redis_sentinel` store without its `master` name";
    MIXED_STORE_NODES = "E073": "cluster or sentinel nodes that differ in TLS or credentials";
    // Budgets.
    BUDGET_LIMIT = "E080": "budget with no limit, or with more than one";
    BUDGET_RANGE = "E081": "budget limit or window that is zero or negative";
    BUDGET_UNKNOWN_MODEL = "E082": "budget's `exceeded = to` names no model";
    UNKNOWN_BUDGET = "E083": "`budget(..)` names no budget";
    BUDGET_PER = "E084": "budget `per` that is neither `tenant` nor text";
    CACHE_BOUND = "E085": "cache `max_entries` or `max_bytes` that is not a positive whole number";
    TEST_BUDGET_NEVER_REJECTS = "E087": "`expect rejected` names a budget that does not reject";
    // Internal errors (a fault of the tool, not of the policy).
    FORMAT_UNSOUND = "E090": "formatting would change the policy (internal error)";
    // Vector stores (`milvus(..)`).
    INVALID_MILVUS_URL = "E091": "`milvus(..)` store URL that is not `http(s)://HOST:PORT`";
    INVALID_MILVUS_COLLECTION = "E092": "`milvus(..)` collection name Milvus refuses";
    UNKNOWN_MILVUS_OPTION = "E093": "`milvus(..)` option other than `collection`";
    MILVUS_OUTSIDE_CACHE = "E094": "`milvus(..)` store for sessions, which only the cache can use";
    // Personal data.
    UNKNOWN_PII_TYPE = "E100": "unknown personal data type in `pii`";
    UNKNOWN_REDACT_TYPE = "E101": "unknown personal data type in `redact`";
    EMPTY_REDACT = "E102": "`redact` lists no type";
    REDACT_ON_REFUSAL = "E103": "`redact` on a block that refuses";
    UNKNOWN_ENTITY_TYPE = "E104": "entity type a detector does not declare or its model does not tag";
    AMBIGUOUS_ENTITY_TYPE = "E105": "bare entity type in `redact` that several detectors declare";
    // Warnings.
    UNUSED_SIGNAL = "W001": "signal never used";
    UNUSED_MODEL_SOURCE = "W002": "classifier, guard, encoder or detector never used";
    UNUSED_MODEL = "W003": "model never selected";
    SHADOWED_ROUTE = "W004": "route can never win";
    UNREACHABLE_CATALOG_MODEL = "W005": "catalog model no route can reach";
    MISSING_MODEL_DIR = "W006": "model directory missing";
    UNUSED_BACKEND = "W007": "backend no model uses";
    PRIORITY_ON_DEFAULT = "W008": "priority on the default route is ignored";
    CREDENTIALS_CROSS_HOSTS = "W009": "client credentials forwarded to backends on different hosts";
    SHADOWED_SERVED_ID = "W010": "name or alias shadows another model's served id";
    MESSAGES_ONLY_ROUTE = "W011": "route only Messages requests can use";
    REPEATED_CANDIDATE = "W012": "model listed twice among a route's candidates";
    SAME_SERVED_MODEL = "W013": "two models serve one id on one backend";
    // Deployment (`src check --envoy`): the policy against the gateway config that runs it.
    FAIL_OPEN_ENFORCEMENT = "W020": "an enforcing policy behind a fail-open gateway";
    EXTPROC_TIMEOUT = "W021": "model signals can outlast the gateway's message timeout";
    GATEWAY_ROUTE = "W022": "the gateway sends a model's requests elsewhere than its backend";
    // Tenancy.
    ANONYMOUS_SHARED = "W030": "requests without a credential share answers and stored responses";
    // Redis topologies.
    DUPLICATE_STORE_NODE = "W040": "a node listed twice in a cluster or sentinel store";
    LONE_SENTINEL = "W041": "a sentinel store listing one sentinel only";
    // The response cache.
    UNUSED_CACHE_BOUND = "W042": "cache `max_entries` or `max_bytes` on a store they do not bound";
    // Vector stores.
    MILVUS_METRICS_PORT = "W044": "`milvus(..)` URL on Milvus's metrics port, not its gRPC port";
    // Models.
    TEXT_PAST_WINDOWS = "W050": "model-backed signal's text can be longer than its model reads";
    // Personal data.
    REPEATED_PII_TYPE = "W055": "personal data type listed twice in `pii`";
    REPEATED_REDACT_TYPE = "W056": "personal data type listed twice in `redact`";
}

/// The title of a code, if it is known.
pub fn title(code: Code) -> Option<&'static str> {
    ALL.iter().find(|(c, _)| *c == code).map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for (code, title) in ALL {
            assert!(seen.insert(code.0), "duplicate code {}", code.0);
            assert!(code.0.len() == 4, "{}", code.0);
            assert!(code.0.starts_with('E') || code.0.starts_with('W'));
            assert!(!title.is_empty());
        }
    }
}
