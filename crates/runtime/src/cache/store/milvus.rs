//! The vector-database cache store (`store = milvus("http://HOST:19530", collection = "…")`):
//! answers every router replica finds through a Milvus collection's own index, with no cap per
//! scope.
//!
//! Spoken to through the official client, `milvus-sdk-rust` (its V2 API over Milvus's gRPC
//! protos), which works against a Milvus cluster and against milvus-lite alike.
//!
//! One row per stored answer, in one collection created on first use:
//! - `id` (the primary key, 32 hex digits), `scope` (the scope's 64 hex digits; the scope hashes
//!   the tenant, so filtering on it keeps tenants apart as exactly as it keeps scopes apart),
//!   `created_ms` and `expires_ms` (the caller's clock), `question` (for the look-alike check),
//!   `body` (the answer, base64) and `vector` (the embedding, cosine metric, `AUTOINDEX`);
//! - the answer rides in the row so a hit is one search with no second read: a body is at most
//!   [`MAX_BODY`] bytes once encoded (a VARCHAR's limit), a larger one is not stored, like one
//!   over the per-entry limit. Chat answers are a few KiB; Redis beside Milvus would lift the
//!   limit at the price of a second store to run and a second round trip per hit.
//!
//! A lookup is one search filtered on the scope and on `created_ms` (so the policy's current
//! `ttl` governs, as in the other stores), asking for [`CANDIDATES`] rows at strong consistency,
//! so an answer stored through one replica is found by the next lookup on any other. Expired
//! rows are deleted (`expires_ms <= now`) at most every `sweep_every` by the insert that finds
//! the last sweep that old. Every search, insert and sweep, and every call's wait for the
//! connection, is bounded by the store timeout. The connection (and the collection's creation and
//! loading, which can take a real Milvus seconds) is opened by a task of its own that every
//! waiting call shares, bounded by [`SETUP_TIMEOUT`], so a slow start still finishes and calls
//! never pile up connection attempts. A failed call drops the connection so the next call opens
//! a fresh one (and re-creates the collection if the server lost it).

use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use futures_util::future::{FutureExt as _, Shared};
use milvus::v2::prelude::{
    ClientV2, CollectionSchema, ConnectConfig, ConsistencyLevel, CreateCollectionRequest, DataType,
    DeleteRequest, DescribeCollectionRequest, DropCollectionRequest, FieldData, FieldSchema,
    HasCollectionRequest, IndexParam, IndexType, InsertRequest, LoadCollectionRequest, MetricType,
    RetryConfig, SearchRequest, SearchVectors, TelemetryConfig,
};
use src_compiler::hir::MilvusTarget;

use crate::cache::scope::Scope;
use crate::cache::store::{
    candidates, CacheStore, Inserted, Lookup, Nearest, StoreError, CANDIDATES,
};
use crate::hooks::BoxFuture;

/// The longest VARCHAR Milvus keeps, in bytes: the bound on a stored question and on a stored
/// body once base64-encoded.
pub const MAX_BODY: usize = 65_535;

/// How often expired rows are deleted, by default.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

const VECTOR: &str = "vector";

/// Answers in a Milvus collection shared by every replica.
pub struct MilvusCache {
    target: MilvusTarget,
    timeout: Duration,
    max_entry_bytes: usize,
    sweep_every_ms: u64,
    /// The connection: none yet, being opened, or open.
    state: Mutex<State>,
    last_sweep_ms: Mutex<u64>,
}

#[derive(Clone)]
struct Ready {
    client: ClientV2,
    dimension: usize,
}

/// Opening a connection (and the collection) runs in a task of its own, bounded by
/// [`SETUP_TIMEOUT`], which every call waiting for it shares: creating and loading a collection
/// can take a real Milvus seconds, far past one lookup's bound, and must still finish.
type Opening = Shared<BoxFuture<'static, Result<Ready, StoreError>>>;

enum State {
    Idle,
    Opening(Opening),
    Ready(Ready),
}

/// The bound on opening the connection and creating and loading the collection.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

impl MilvusCache {
    /// A store on `target`; connects on first use, so a Milvus that is down at startup only
    /// fails the calls made while it is down. Every call is bounded by `timeout`.
    pub fn new(target: MilvusTarget, timeout: Duration, max_entry_bytes: usize) -> MilvusCache {
        MilvusCache {
            target,
            timeout,
            max_entry_bytes,
            sweep_every_ms: u64::try_from(SWEEP_EVERY.as_millis()).unwrap_or(u64::MAX),
            state: Mutex::new(State::Idle),
            last_sweep_ms: Mutex::new(0),
        }
    }

    /// Deletes expired rows at most every `every` (tests sweep on each insert).
    pub fn with_sweep_every(mut self, every: Duration) -> MilvusCache {
        self.sweep_every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// The collection the store keeps its rows in.
    pub fn collection(&self) -> &str {
        &self.target.collection
    }

    /// Deletes the rows expired at `now_ms`; answers how many went.
    pub async fn sweep(&self, now_ms: u64) -> Result<u64, StoreError> {
        let ready = self.ready(None).await?;
        let request = DeleteRequest::builder()
            .collection_name(self.target.collection.as_str())
            .filter(format!("expires_ms <= {}", as_i64(now_ms)))
            .build()
            .map_err(rejected)?;
        let deleted = self.call("sweep", ready.client.delete(request)).await?;
        Ok(u64::try_from(deleted.delete_count()).unwrap_or(0))
    }

    /// `step`, bounded by the timeout; any failure drops the connection.
    async fn call<T>(
        &self,
        op: &'static str,
        step: impl std::future::Future<Output = milvus::v2::error::Result<T>>,
    ) -> Result<T, StoreError> {
        let outcome = match tokio::time::timeout(self.timeout, step).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => translate(error),
            Err(_) => StoreError::Timeout {
                op,
                after: self.timeout,
            },
        };
        let mut state = self.state();
        // A connection being opened is already a fresh one.
        if matches!(*state, State::Ready(_)) {
            *state = State::Idle;
        }
        Err(outcome)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The open client, opening the connection and creating the collection (with `dimension`,
    /// when the caller has a vector) first if need be; the wait is bounded by the timeout.
    async fn ready(&self, dimension: Option<usize>) -> Result<Ready, StoreError> {
        let opening = {
            let mut state = self.state();
            match &*state {
                State::Ready(ready) => return Ok(ready.clone()),
                State::Opening(opening) => opening.clone(),
                State::Idle => {
                    let target = self.target.clone();
                    let opening: Opening = async move {
                        tokio::time::timeout(SETUP_TIMEOUT, open(target, dimension))
                            .await
                            .unwrap_or(Err(StoreError::Timeout {
                                op: "connect",
                                after: SETUP_TIMEOUT,
                            }))
                    }
                    .boxed()
                    .shared();
                    // Driven to its end even when every call waiting for it gave up.
                    tokio::spawn(opening.clone());
                    *state = State::Opening(opening.clone());
                    opening
                }
            }
        };
        let outcome = tokio::time::timeout(self.timeout, opening)
            .await
            .map_err(|_| StoreError::Timeout {
                op: "connect",
                after: self.timeout,
            })?;
        let mut state = self.state();
        if matches!(*state, State::Opening(_)) {
            *state = match &outcome {
                Ok(ready) => State::Ready(ready.clone()),
                Err(_) => State::Idle,
            };
        }
        outcome
    }

    /// The client, when `vector` fits the collection.
    async fn fitting(&self, vector: &[f32]) -> Result<Ready, StoreError> {
        let ready = self.ready(Some(vector.len())).await?;
        if ready.dimension != vector.len() {
            return Err(StoreError::Config(format!(
                "collection `{}` holds {}-dimension vectors and the encoder gives {}; name \
                 another collection for this encoder",
                self.target.collection,
                ready.dimension,
                vector.len()
            )));
        }
        Ok(ready)
    }

    /// Deletes expired rows when the last sweep is older than `sweep_every`; a failed sweep
    /// is retried by a later insert and costs nothing else.
    async fn maybe_sweep(&self, now_ms: u64) {
        {
            let mut last = self
                .last_sweep_ms
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if now_ms < last.saturating_add(self.sweep_every_ms) {
                return;
            }
            *last = now_ms;
        }
        if let Err(error) = self.sweep(now_ms).await {
            tracing::debug!(%error, "expired cache rows not deleted");
        }
    }
}

/// Connects to `target` and makes sure its collection exists and is loaded.
async fn open(target: MilvusTarget, dimension: Option<usize>) -> Result<Ready, StoreError> {
    let mut config = ConnectConfig::new()
        .uri(target.endpoint.as_str())
        .connect_timeout(SETUP_TIMEOUT)
        .rpc_timeout(SETUP_TIMEOUT)
        // One attempt: the store's own timeout and `failure.store` decide what a failure
        // does, and a retried call would outlast both.
        .retry(RetryConfig::new().max_attempts(1))
        .telemetry(TelemetryConfig::new().enabled(false));
    if let Some(token) = &target.token {
        config = config.token(token.as_str());
    }
    let client = ClientV2::new(&config).await.map_err(translate)?;
    let name = target.collection.as_str();
    let exists = client
        .has_collection(
            HasCollectionRequest::builder()
                .collection_name(name)
                .build()
                .map_err(rejected)?,
        )
        .await
        .map_err(translate)?
        .exists();
    if !exists {
        let Some(dimension) = dimension else {
            return Err(StoreError::Unavailable(format!(
                "collection `{name}` does not exist yet"
            )));
        };
        let created = client
            .create_collection(create_request(name, dimension)?)
            .await;
        // Another replica may have created it in between: only a collection still missing
        // is an error.
        if let Err(error) = created {
            let now = client
                .has_collection(
                    HasCollectionRequest::builder()
                        .collection_name(name)
                        .build()
                        .map_err(rejected)?,
                )
                .await
                .map_err(translate)?
                .exists();
            if !now {
                return Err(translate(error));
            }
        }
    }
    client
        .load_collection(
            LoadCollectionRequest::builder()
                .collection_name(name)
                .build()
                .map_err(rejected)?,
        )
        .await
        .map_err(translate)?;
    let dimension = vector_dimension(&client, name).await?.ok_or_else(|| {
        StoreError::Config(format!(
            "collection `{name}` has no `{VECTOR}` field: it was not made by this router"
        ))
    })?;
    Ok(Ready { client, dimension })
}

/// What `src doctor` finds of a policy's Milvus store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    /// The collection's vector length when it exists; `None` when it does not exist yet and a
    /// collection of the encoder's dimension was created and dropped beside it (so the store
    /// can create its own on first use).
    pub dimension: Option<usize>,
    /// Why Milvus refused to create the scratch collection, when the collection does not exist
    /// and this client may not create one (no right to, or a server that cannot write): the
    /// store would fail on first use.
    pub refused: Option<String>,
}

/// The longest collection name Milvus takes.
const MAX_NAME: usize = 255;

/// A scratch collection's name beside `name`, `{name}_survey_{id}` with `name` cut short so
/// that the whole stays within [`MAX_NAME`]: the longest name the store may use must not make
/// the survey's own name one Milvus refuses.
fn scratch_name(name: &str, id: &str) -> String {
    let suffix = format!("_survey_{id}");
    let mut keep = MAX_NAME.saturating_sub(suffix.len()).min(name.len());
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &name[..keep])
}

/// Connects to `target` and looks at its collection without changing what the server holds:
/// when the collection exists, its vector length; when it does not, whether this client may
/// create one of `dimension` (a scratch collection beside it, created and dropped at once).
/// The whole survey is bounded by `timeout`.
pub async fn survey(
    target: &MilvusTarget,
    dimension: usize,
    timeout: Duration,
) -> Result<Survey, StoreError> {
    let asked = async {
        let mut config = ConnectConfig::new()
            .uri(target.endpoint.as_str())
            .connect_timeout(timeout)
            .rpc_timeout(timeout)
            .retry(RetryConfig::new().max_attempts(1))
            .telemetry(TelemetryConfig::new().enabled(false));
        if let Some(token) = &target.token {
            config = config.token(token.as_str());
        }
        let client = ClientV2::new(&config).await.map_err(translate)?;
        let name = target.collection.as_str();
        let has = |name: String| {
            let client = &client;
            async move {
                let request = HasCollectionRequest::builder()
                    .collection_name(name)
                    .build()
                    .map_err(rejected)?;
                Ok::<bool, StoreError>(
                    client
                        .has_collection(request)
                        .await
                        .map_err(translate)?
                        .exists(),
                )
            }
        };
        if has(name.to_owned()).await? {
            let found = vector_dimension(&client, name).await?.ok_or_else(|| {
                StoreError::Config(format!(
                    "collection `{name}` has no `{VECTOR}` field: it was not made by this \
                         router; name another collection"
                ))
            })?;
            return Ok(Survey {
                dimension: Some(found),
                refused: None,
            });
        }
        let id: [u8; 4] = rand::random();
        let scratch = scratch_name(name, &crate::hex::lower(&id));
        let created = client
            .create_collection(create_request(&scratch, dimension)?)
            .await
            .map_err(translate);
        match created {
            Ok(_) => {}
            // Milvus answered and said no: the survey's finding, not its failure.
            Err(StoreError::Rejected(why)) => {
                return Ok(Survey {
                    dimension: None,
                    refused: Some(why),
                })
            }
            Err(other) => return Err(other),
        }
        client
            .drop_collection(
                DropCollectionRequest::builder()
                    .collection_name(scratch.as_str())
                    .build()
                    .map_err(rejected)?,
            )
            .await
            .map_err(translate)?;
        Ok(Survey {
            dimension: None,
            refused: None,
        })
    };
    tokio::time::timeout(timeout, asked)
        .await
        .unwrap_or(Err(StoreError::Timeout {
            op: "survey",
            after: timeout,
        }))
}

/// The length of the vectors collection `name` holds; `None` when it has no vector field of
/// ours (a collection this router did not make).
async fn vector_dimension(client: &ClientV2, name: &str) -> Result<Option<usize>, StoreError> {
    let described = client
        .describe_collection(
            DescribeCollectionRequest::builder()
                .collection_name(name)
                .build()
                .map_err(rejected)?,
        )
        .await
        .map_err(translate)?;
    Ok(described
        .description()
        .get_schema()
        .get_fields()
        .iter()
        .find(|f| f.get_name() == VECTOR)
        .map(|f| f.get_dimension() as usize))
}

fn create_request(name: &str, dimension: usize) -> Result<CreateCollectionRequest, StoreError> {
    let text = |n: &str, len: u32| {
        FieldSchema::new()
            .name(n)
            .data_type(DataType::VarChar)
            .max_length(len)
    };
    let number = |n: &str| FieldSchema::new().name(n).data_type(DataType::Int64);
    let dimension = u32::try_from(dimension)
        .map_err(|_| StoreError::Config(format!("{dimension} dimensions")))?;
    let schema = CollectionSchema::new()
        .add_field(text("id", 32).primary_key(true))
        .add_field(text("scope", 64))
        .add_field(number("created_ms"))
        .add_field(number("expires_ms"))
        .add_field(text("question", MAX_BODY as u32))
        .add_field(text("body", MAX_BODY as u32))
        .add_field(
            FieldSchema::new()
                .name(VECTOR)
                .data_type(DataType::FloatVector)
                .dimension(dimension),
        );
    CreateCollectionRequest::builder()
        .collection_name(name)
        .schema(schema)
        .index_param(
            IndexParam::new()
                .field_name(VECTOR)
                .index_type(IndexType::AutoIndex)
                .metric_type(MetricType::Cosine),
        )
        .build()
        .map_err(rejected)
}

fn as_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A failure of the client: transport errors and timeouts are the store being unavailable,
/// the server's refusals are rejections.
fn translate(error: milvus::v2::error::Error) -> StoreError {
    use milvus::v2::error::Error;
    match error {
        Error::Server(e) => StoreError::Rejected(e.to_string()),
        Error::Validation(e) => StoreError::Rejected(e.to_string()),
        Error::Conversion(e) => StoreError::Corrupt(e.to_string()),
        Error::MalformedResponse(e) => StoreError::Corrupt(e),
        other => StoreError::Unavailable(other.to_string()),
    }
}

fn rejected(error: milvus::v2::error::Error) -> StoreError {
    StoreError::Rejected(error.to_string())
}

/// One candidate row of a search.
struct Row {
    question: String,
    body: String,
}

impl CacheStore for MilvusCache {
    fn kind(&self) -> &'static str {
        "milvus"
    }

    fn nearest<'a>(&'a self, lookup: Lookup<'a>) -> BoxFuture<'a, Result<Nearest, StoreError>> {
        let Lookup {
            scope,
            vector,
            threshold,
            now_ms,
            ttl_ms,
            accept,
        } = lookup;
        Box::pin(async move {
            let ready = self.fitting(vector).await?;
            // Live at `now_ms`: `now < created + ttl`, i.e. `created > now - ttl`.
            let mut filter = format!("scope == \"{}\"", scope.hex());
            if let Some(floor) = now_ms.checked_sub(ttl_ms) {
                filter.push_str(&format!(" && created_ms > {}", as_i64(floor)));
            }
            let request = SearchRequest::builder()
                .collection_name(self.target.collection.as_str())
                .vector_field(VECTOR)
                .vectors(SearchVectors::Float(vec![vector.to_vec()]))
                .metric_type(MetricType::Cosine)
                .filter(filter)
                .output_fields(["question", "body"])
                .limit(CANDIDATES as i64)
                .consistency_level(ConsistencyLevel::Strong)
                .build()
                .map_err(rejected)?;
            let found = self.call("lookup", ready.client.search(request)).await?;
            let mut scored = Vec::new();
            for result in found.results().iter() {
                let scores = result.get_scores();
                let rows = result
                    .rows()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                for (row, score) in rows.zip(scores) {
                    let row = Row {
                        question: row
                            .get_str("question")
                            .map_err(|e| StoreError::Corrupt(e.to_string()))?
                            .to_owned(),
                        body: row
                            .get_str("body")
                            .map_err(|e| StoreError::Corrupt(e.to_string()))?
                            .to_owned(),
                    };
                    scored.push((row, *score));
                }
            }
            let mut nearest = Nearest {
                score: scored.iter().map(|s| s.1).reduce(f32::max),
                ..Nearest::default()
            };
            let taken = candidates(scored, threshold).into_iter().find(|(row, _)| {
                let taken = accept(&row.question);
                nearest.rejected += u32::from(!taken);
                taken
            });
            if let Some((row, score)) = taken {
                let body = base64::engine::general_purpose::STANDARD
                    .decode(row.body.as_bytes())
                    .map_err(|e| StoreError::Corrupt(format!("a stored body: {e}")))?;
                nearest.score = Some(score);
                nearest.body = Some(Bytes::from(body));
            }
            Ok(nearest)
        })
    }

    fn insert<'a>(
        &'a self,
        scope: &'a Scope,
        vector: &'a [f32],
        question: &'a str,
        body: Bytes,
        now_ms: u64,
        ttl_ms: u64,
    ) -> BoxFuture<'a, Result<Inserted, StoreError>> {
        Box::pin(async move {
            if body.len() > self.max_entry_bytes
                || body.len().div_ceil(3) * 4 > MAX_BODY
                || question.len() > MAX_BODY
            {
                return Ok(Inserted::TooLarge);
            }
            let ready = self.fitting(vector).await?;
            let id: [u8; 16] = rand::random();
            let text = |name: &str, value: String| FieldData::VarChar {
                name: name.into(),
                values: vec![value],
            };
            let number = |name: &str, value: u64| FieldData::Int64 {
                name: name.into(),
                values: vec![as_i64(value)],
            };
            let request = InsertRequest::builder()
                .collection_name(self.target.collection.as_str())
                .columns(vec![
                    text("id", crate::hex::lower(&id)),
                    text("scope", scope.hex()),
                    number("created_ms", now_ms),
                    number("expires_ms", now_ms.saturating_add(ttl_ms.max(1))),
                    text("question", question.to_owned()),
                    text(
                        "body",
                        base64::engine::general_purpose::STANDARD.encode(&body),
                    ),
                    FieldData::FloatVector {
                        name: VECTOR.into(),
                        values: vec![vector.to_vec()],
                    },
                ])
                .build()
                .map_err(rejected)?;
            self.call("store", ready.client.insert(request)).await?;
            self.maybe_sweep(now_ms).await;
            Ok(Inserted::Stored)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_name_stays_within_milvuss_limit() {
        assert_eq!(
            scratch_name("answers", "0a1b2c3d"),
            "answers_survey_0a1b2c3d"
        );
        let longest = "a".repeat(MAX_NAME);
        let scratch = scratch_name(&longest, "0a1b2c3d");
        assert_eq!(scratch.len(), MAX_NAME);
        assert!(scratch.ends_with("_survey_0a1b2c3d"));
        assert!(scratch_name(&"é".repeat(200), "00").len() <= MAX_NAME);
    }
}
