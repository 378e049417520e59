//! The semantic response cache (docs/language.md, "`cache`", and step 4 of docs/language.md,
//! "What happens to a request"): once blocks, model resolution and routes have proposed a
//! logical model, a stored answer that this model gave to an equivalent request answers instead
//! of the backend.
//!
//! "Equivalent" has two parts. Everything about the request except the wording of its final
//! user message must be identical: the [`scope`] is a hash of the tenant, the API, the proposed
//! model (its served id and the route's plugins too) and the whole body with that message's text
//! left out. Within a scope, the final user message is compared by meaning: the encoder embeds
//! it and the nearest stored entry answers when its cosine similarity reaches the threshold, it
//! is younger than the ttl, and the question it was stored for agrees with the request's on what
//! the encoder is blind to (numbers, units and direction, dates, polarity, names: the compiler's
//! `lookalike` check; a refused candidate makes the lookup a `miss-verified`). Because the model is part of the scope, a hit is always an answer
//! that the proposed model gave: the router never overrides a model decision for a hit.
//!
//! This module is a library: it knows nothing of the server or of HTTP answers. The request
//! path's lookup (once the request procedure found that the cache applies: embed, look up) is
//! the pipeline's `cache_step`, which uses:
//!
//! - [`scope`]: the exact-match key and whose answers a request may see; [`store`]: where
//!   entries live (memory or Redis);
//! - [`fill`]: storing a complete answer once it has been relayed; [`assemble`]: a streamed
//!   chat answer turned back into its completion, so streamed answers are stored too;
//! - [`replay`]: a stored completion replayed as an event stream for a streaming chat request;
//! - [`directive`]: the client's `x-sr-cache: no-cache | no-store` request header;
//! - [`layer`]: the server's cache component (stores, clock, options); [`metrics`]: counters.

pub mod assemble;
pub mod directive;
pub mod fill;
pub mod layer;
pub mod metrics;
pub mod replay;
pub mod scope;
pub mod store;

pub use directive::Directive;
pub use fill::Fill;
pub use layer::{CacheLayer, CacheOptions, DEFAULT_TTL_MS};
pub use metrics::CacheMetrics;
pub use scope::Scope;
pub use store::{CacheStore, Inserted, MemoryCache, MilvusCache, Nearest, RedisCache, PER_SCOPE};
