//! The checked policy: every name resolved, every expression typed.
//!
//! This is what `check` produces and what `lower` (and the language server, and `src explain`)
//! consume. References are indices into the policy's tables, never strings, so later phases
//! cannot disagree with the checker about what a name meant. Spans point back into the source
//! for traces and diagnostics.

use src_dsl::ast::{Device, FailMode, Missing, Outcomes, OwnerLost, ProtectMode, Reasoning};
use src_dsl::{SourceMap, Span};
use std::path::PathBuf;

pub use crate::milvus_target::{MilvusTarget, MilvusUrlError};
pub use crate::redis_target::{RedisTarget, TargetError};
pub use crate::redis_url::{RedisUrl, RedisUrlError};
pub use http::{HeaderName, HeaderValue};

macro_rules! id_type {
    ($($name:ident),*) => {$(
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize { self.0 as usize }
        }
    )*};
}
id_type!(
    BackendId,
    ModelId,
    ClassifierId,
    GuardId,
    EncoderId,
    DetectorId,
    SignalId,
    BlockId,
    RouteId,
    LabelId,
    BudgetId
);

/// Which label set a `class<..>` value draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassSet {
    Classifier(ClassifierId),
    /// `language(TEXT)`: ISO 639-1 codes, see `crate::language::LABELS`.
    Language,
}

/// The types of docs/language.md, "Expressions and types".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    Bool,
    Int,
    /// A float in [0, 1].
    Score,
    Float,
    Text,
    /// Optional text: `header(..)`, `api_key`, `a ?? b` with an optional right side.
    OptText,
    Class(ClassSet),
    Model,
}

impl Type {
    /// The type as the language writes it (`bool`, `text?`, `class<domain>`), with `set_name`
    /// naming a class type's label set.
    pub fn written(self, set_name: impl FnOnce(ClassSet) -> String) -> String {
        match self {
            Type::Bool => "bool".into(),
            Type::Int => "int".into(),
            Type::Score => "score".into(),
            Type::Float => "float".into(),
            Type::Text => "text".into(),
            Type::OptText => "text?".into(),
            Type::Model => "model".into(),
            Type::Class(set) => format!("class<{}>", set_name(set)),
        }
    }

    pub fn is_numeric(self) -> bool {
        matches!(self, Type::Int | Type::Score | Type::Float)
    }

    pub fn is_textual(self) -> bool {
        matches!(self, Type::Text | Type::OptText)
    }
}

/// Fields of `request.*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestField {
    Tools,
    Turns,
    Messages,
    ToolCalls,
    ToolResults,
    Stream,
    ToolLoop,
    ProviderState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A typed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct TExpr {
    pub kind: TExprKind,
    pub ty: Type,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TExprKind {
    Bool(bool),
    Int(i64),
    /// A float or score literal (its `ty` says which).
    Float(f64),
    Str(String),
    /// A label literal of the set in `ty` (right side of `==`/`!=` against a class value).
    Label(LabelId),
    /// A model name used as a value (`pinned == strong`).
    Model(ModelId),
    Signal(SignalId),
    Prompt,
    History,
    System,
    ApiKey,
    /// `header("name")`, the name lowercased.
    Header(String),
    /// `body("a.b")`, a dotted path into the request body.
    Body(String),
    Request(RequestField),
    Contains {
        text: Box<TExpr>,
        phrases: Vec<String>,
    },
    Hits {
        text: Box<TExpr>,
        phrases: Vec<String>,
    },
    Count {
        text: Box<TExpr>,
        regex: String,
    },
    Density {
        text: Box<TExpr>,
        phrases: Vec<String>,
    },
    Sequence {
        text: Box<TExpr>,
        phrases: Vec<String>,
    },
    /// `fuzzy(text, [..], min)`: `min` stays the literal's value, in (0, 1].
    Fuzzy {
        text: Box<TExpr>,
        phrases: Vec<String>,
        min: f64,
    },
    FuzzyHits {
        text: Box<TExpr>,
        phrases: Vec<String>,
        min: f64,
    },
    Bm25 {
        text: Box<TExpr>,
        phrases: Vec<String>,
    },
    Words(Box<TExpr>),
    Language(Box<TExpr>),
    Matches {
        text: Box<TExpr>,
        regex: String,
    },
    Tokens(Box<TExpr>),
    /// `pii(text, [types])`: the set without repeats, in source order.
    Pii {
        text: Box<TExpr>,
        types: Vec<crate::pii::EntityType>,
    },
    Classify(ClassifierId, Box<TExpr>),
    Guard(GuardId, Box<TExpr>),
    /// `D(text, [TYPES])`: whether the detector finds an entity of one of `entities` (the
    /// declaration's types, without repeats, in source order) scoring at least its threshold.
    Detect {
        detector: DetectorId,
        text: Box<TExpr>,
        entities: Vec<String>,
    },
    Similarity {
        encoder: EncoderId,
        text: Box<TExpr>,
        examples: Vec<String>,
    },
    /// `e.confidence` of a class value.
    Confidence(Box<TExpr>),
    /// `protect` only.
    Pinned,
    /// `protect` only.
    Proposed,
    /// `M.cost` of a model value.
    Cost(Box<TExpr>),
    /// `outcomes(pinned).fail_rate` (`protect` only).
    OutcomeFailRate,
    /// `outcomes(pinned).count` (`protect` only).
    OutcomeCount,
    /// `budget(NAME).used`: the share of the budget used before this request, 0–1.
    BudgetUsed(BudgetId),
    /// `budget(NAME).remaining`: what is left, in the budget's unit.
    BudgetRemaining(BudgetId),
    Not(Box<TExpr>),
    And(Box<TExpr>, Box<TExpr>),
    Or(Box<TExpr>, Box<TExpr>),
    Neg(Box<TExpr>),
    /// Numeric arithmetic; `ty` is `Int` when both sides are int, else `Float`.
    Arith(ArithOp, Box<TExpr>, Box<TExpr>),
    /// Comparison of two values of matching types (numbers with numbers, texts, labels, models).
    Cmp(CmpOp, Box<TExpr>, Box<TExpr>),
    /// `a ?? b`
    Coalesce(Box<TExpr>, Box<TExpr>),
    /// `e is L` / `e in [L..]`: the class value is one of these labels.
    IsLabel(Box<TExpr>, Vec<LabelId>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackendDef {
    pub name: String,
    pub span: Span,
    /// As written. Unless `simulated`, an absolute `http` or `https` URL with a host once its
    /// trailing `/`s are dropped (E047).
    pub url: String,
    /// Resolved relative to the policy root.
    pub catalog: Option<PathBuf>,
    /// Environment variable holding the API key.
    pub api_key_env: Option<String>,
    pub timeout_ms: Option<u64>,
    pub simulated: bool,
    /// Whether the client's credentials (`authorization`, `api-key`, `x-api-key`) are sent on
    /// when no `api_key` replaces them: `client_auth`, by default `drop` with an `api_key` and
    /// `forward` without.
    pub forward_client_auth: bool,
    /// The protocol it speaks (`api = openai|anthropic`).
    pub api: src_dsl::ast::BackendApi,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelDef {
    pub name: String,
    pub span: Span,
    pub backend: BackendId,
    /// The backend's id for the model; never empty (E048).
    pub serves: String,
    /// `serves` as the value of the `x-selected-model` header (E048: it can be one).
    pub served_header: HeaderValue,
    pub aliases: Vec<String>,
    /// Declared relative cost; 0 when not given.
    pub cost: f64,
    pub context: Option<u64>,
    pub tokenizer: Option<PathBuf>,
}

pub use crate::window::{DEFAULT_WINDOWS, DETECTOR_WINDOW, MAX_WINDOWS};

#[derive(Debug, Clone, PartialEq)]
pub struct ClassifierDef {
    pub name: String,
    pub span: Span,
    pub path: PathBuf,
    pub labels: Vec<String>,
    pub device: Device,
    /// Most windows of one text the model reads (`windows`, by default [`DEFAULT_WINDOWS`]).
    pub windows: usize,
    /// Tokens per window (`window`); `None`: the model's `max_length`.
    pub window: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GuardDef {
    pub name: String,
    pub span: Span,
    pub path: PathBuf,
    /// The unsafe label, when declared.
    pub positive: Option<String>,
    /// The label whose probability is the guard's score: `positive`, or else the one label of
    /// the model's two that is not a safe one (`benign`, `safe`, `LABEL_0`). Resolved against
    /// the model's `config.json` when its directory can be read (E042); `positive` as written
    /// when it cannot, and `None` when there is neither.
    pub unsafe_label: Option<String>,
    pub device: Device,
    pub windows: usize,
    /// Tokens per window (`window`, by default [`DETECTOR_WINDOW`]).
    pub window: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EncoderDef {
    pub name: String,
    pub span: Span,
    pub path: PathBuf,
    pub device: Device,
    pub windows: usize,
    /// Tokens per window (`window`, by default [`DETECTOR_WINDOW`]).
    pub window: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DetectorDef {
    pub name: String,
    pub span: Span,
    pub path: PathBuf,
    /// The entity types calls may ask about, as declared.
    pub entities: Vec<String>,
    /// The least entity score that counts as found, in (0, 1] (E045), by default
    /// [`DEFAULT_DETECTOR_THRESHOLD`].
    pub threshold: f64,
    pub device: Device,
    pub windows: usize,
    /// Tokens per window (`window`); `None`: the model's `max_length`.
    pub window: Option<usize>,
}

/// A detector's `threshold` when none is declared.
pub const DEFAULT_DETECTOR_THRESHOLD: f64 = 0.5;

#[derive(Debug, Clone, PartialEq)]
pub struct SignalDef {
    pub name: String,
    pub span: Span,
    pub expr: TExpr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum BlockActionDef {
    Refuse {
        status: u16,
        message: Option<String>,
    },
    Redirect(ModelId),
}

#[derive(Debug, Clone, PartialEq)]
pub struct BlockDef {
    pub name: String,
    pub span: Span,
    pub when: TExpr,
    pub action: BlockActionDef,
    /// `redact = [...]` on a redirect: what it forwards carries placeholders.
    pub redact: Option<crate::pii::Redact>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolsDef {
    Keep,
    None,
    Only(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouteDef {
    pub name: String,
    pub span: Span,
    /// `None` for the default route.
    pub priority: Option<i64>,
    /// `None` for the default route.
    pub when: Option<TExpr>,
    pub to: ModelId,
    pub fallbacks: Vec<ModelId>,
    /// `(text, replace)`.
    pub system_prompt: Option<(String, bool)>,
    /// `headers { }` as written, `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// The same, as the HTTP header fields sent upstream (E049: each is one).
    pub header_fields: Vec<(HeaderName, HeaderValue)>,
    pub reasoning: Option<Reasoning>,
    pub tools: ToolsDef,
    pub cache: bool,
    /// `redact = [...]`: what the route forwards carries placeholders for these types.
    pub redact: Option<crate::pii::Redact>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreDef {
    Memory,
    /// A Redis the runtime's client opens: one server (E046), a Cluster or a Sentinel set
    /// (E070–E073).
    Redis(RedisTarget),
    /// A Milvus collection (E091–E094, W044): cache answers only.
    Milvus(MilvusTarget),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CacheDef {
    pub encoder: EncoderId,
    pub threshold: f64,
    pub ttl_ms: Option<u64>,
    pub store: StoreDef,
    /// The memory store's bounds; `None` keeps the server's (10,000 entries, 256 MiB).
    pub max_entries: Option<u64>,
    pub max_bytes: Option<u64>,
    pub skip_when: Option<TExpr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionDef {
    /// A `text?` expression; defaults to the three affinity headers.
    pub id: TExpr,
    /// A `text?` expression; `None` means a hash of the API key.
    pub tenant: Option<TExpr>,
    /// Default 10 minutes.
    pub ttl_ms: u64,
    pub store: StoreDef,
    pub missing: Missing,
    /// Who may report outcomes for a session; `any` when not declared.
    pub outcomes: Outcomes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HoldDef {
    pub name: String,
    pub span: Span,
    pub when: TExpr,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProtectDef {
    pub mode: ProtectMode,
    pub holds: Vec<HoldDef>,
    /// `owner_lost`; `None` when not declared (the default then depends on the call: see
    /// [`ProtectDef::owner_lost_for`]).
    pub owner_lost: Option<OwnerLost>,
}

impl ProtectDef {
    /// What a call does when its pinned model fails it: the declared rule, else `fail` for a
    /// turn inside a tool loop (the agent must not change models mid-loop) or one that continues
    /// provider-owned state (no other backend has the conversation), and `fallback` elsewhere.
    pub fn owner_lost_for(&self, tool_loop: bool, provider_state: bool) -> OwnerLost {
        self.owner_lost.unwrap_or(if tool_loop || provider_state {
            OwnerLost::Fail
        } else {
            OwnerLost::Fallback
        })
    }
}

/// `failure { }` with defaults applied. `classifier` is `None` when not declared: the default
/// then depends on the signal (closed for signals a block uses, open otherwise).
#[derive(Debug, Clone, PartialEq)]
pub struct FailureDef {
    pub classifier: Option<FailMode>,
    pub store: FailMode,
    pub backend: FailMode,
    /// Set when the policy declares `cooldown_after` or `cooldown` (the other then takes its
    /// default): a model that failed that many times in a row is skipped for a while.
    pub cooldown: Option<CooldownDef>,
}

/// `failure { cooldown_after = N  cooldown = D }`: after `after` consecutive failures a model is
/// skipped for `millis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CooldownDef {
    pub after: u32,
    pub millis: u64,
}

impl CooldownDef {
    /// `cooldown_after` when only `cooldown` is declared.
    pub const DEFAULT_AFTER: u32 = 3;
    /// `cooldown` when only `cooldown_after` is declared: 30 s.
    pub const DEFAULT_MILLIS: u64 = 30_000;
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetUnit {
    Requests,
    /// Prompt and completion tokens, from the answer's usage.
    Tokens,
    /// Σ tokens / 1000 × the answering model's `cost`.
    Cost,
}

impl BudgetUnit {
    /// The unit as a budget's field names it.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetUnit::Requests => "requests",
            BudgetUnit::Tokens => "tokens",
            BudgetUnit::Cost => "cost",
        }
    }
}

/// Whose usage a budget counts.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetPerDef {
    /// The request's tenant (the runtime's one tenant function).
    Tenant,
    /// A `text?` expression; a request it yields no text for is not counted.
    Text(TExpr),
}

/// What a request over its budget gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetAction {
    Reject,
    To(ModelId),
    Observe,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BudgetDef {
    pub name: String,
    pub span: Span,
    pub per: BudgetPerDef,
    pub window_ms: u64,
    pub unit: BudgetUnit,
    /// Positive (E081).
    pub limit: f64,
    pub exceeded: BudgetAction,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouterDef {
    /// Defaults to `["auto"]`.
    pub names: Vec<String>,
    pub tokenizer: Option<PathBuf>,
    /// What requests without a credential share; `isolate` unless the policy says `share`.
    pub anonymous: src_dsl::ast::Anonymous,
}

/// A value a test stubs for a signal with `given`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(Option<String>),
    Label(ClassSet, LabelId),
    Model(ModelId),
}

#[derive(Debug, Clone, PartialEq)]
pub enum TestInputDef {
    Prompt(String),
    /// The request JSON read from the `messages` file (a full chat request or its `messages`).
    Messages(serde_json::Value),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExpectDef {
    Route(RouteId),
    Blocked(BlockId),
    /// Refused by this budget (its `exceeded` is `reject`).
    Rejected(BudgetId),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestDef {
    pub name: String,
    pub span: Span,
    pub input: TestInputDef,
    pub system: Option<String>,
    pub headers: Vec<(String, String)>,
    pub givens: Vec<(SignalId, Value)>,
    /// `given BUDGET = SHARE`: the share of a budget used before the test's request.
    pub budget_givens: Vec<(BudgetId, f64)>,
    pub expect: ExpectDef,
    pub expect_model: Option<ModelId>,
}

/// A policy that passed `check` with no errors.
#[derive(Debug, Clone)]
pub struct CheckedPolicy {
    pub sources: SourceMap,
    /// The policy directory (or the single file's directory): relative paths resolve from here.
    pub root: PathBuf,
    pub backends: Vec<BackendDef>,
    pub models: Vec<ModelDef>,
    pub classifiers: Vec<ClassifierDef>,
    pub guards: Vec<GuardDef>,
    pub encoders: Vec<EncoderDef>,
    pub detectors: Vec<DetectorDef>,
    /// In an order where every signal comes after the signals it uses.
    pub signals: Vec<SignalDef>,
    /// In declaration order (files in lexicographic order).
    pub blocks: Vec<BlockDef>,
    /// By descending priority; the default route is last.
    pub routes: Vec<RouteDef>,
    pub cache: Option<CacheDef>,
    pub session: Option<SessionDef>,
    pub protect: Option<ProtectDef>,
    pub failure: FailureDef,
    pub router: RouterDef,
    pub tests: Vec<TestDef>,
    /// In declaration order: the first exceeded one acts.
    pub budgets: Vec<BudgetDef>,
}

impl CheckedPolicy {
    pub fn signal_by_name(&self, name: &str) -> Option<SignalId> {
        self.signals
            .iter()
            .position(|s| s.name == name)
            .map(|i| SignalId(i as u32))
    }

    pub fn budget_by_name(&self, name: &str) -> Option<BudgetId> {
        self.budgets
            .iter()
            .position(|b| b.name == name)
            .map(|i| BudgetId(i as u32))
    }

    pub fn model_by_name(&self, name: &str) -> Option<ModelId> {
        self.models
            .iter()
            .position(|m| m.name == name)
            .map(|i| ModelId(i as u32))
    }

    /// The label names of a class set.
    pub fn labels(&self, set: ClassSet) -> &[String] {
        match set {
            ClassSet::Classifier(c) => &self.classifiers[c.index()].labels,
            ClassSet::Language => crate::language::labels(),
        }
    }

    /// The default route (always present in a checked policy): the last one.
    pub fn default_route(&self) -> RouteId {
        RouteId(self.routes.len().saturating_sub(1) as u32)
    }
}

impl TExpr {
    /// The direct subexpressions.
    pub fn children(&self) -> Vec<&TExpr> {
        use TExprKind as K;
        match &self.kind {
            K::Contains { text, .. }
            | K::Hits { text, .. }
            | K::Count { text, .. }
            | K::Density { text, .. }
            | K::Sequence { text, .. }
            | K::Fuzzy { text, .. }
            | K::FuzzyHits { text, .. }
            | K::Bm25 { text, .. }
            | K::Matches { text, .. }
            | K::Pii { text, .. }
            | K::Detect { text, .. }
            | K::Similarity { text, .. } => vec![text],
            K::Words(x)
            | K::Language(x)
            | K::Tokens(x)
            | K::Classify(_, x)
            | K::Guard(_, x)
            | K::Confidence(x)
            | K::Cost(x)
            | K::Not(x)
            | K::Neg(x)
            | K::IsLabel(x, _) => vec![x],
            K::And(a, b)
            | K::Or(a, b)
            | K::Arith(_, a, b)
            | K::Cmp(_, a, b)
            | K::Coalesce(a, b) => vec![a, b],
            K::Bool(_)
            | K::Int(_)
            | K::Float(_)
            | K::Str(_)
            | K::Label(_)
            | K::Model(_)
            | K::Signal(_)
            | K::Prompt
            | K::History
            | K::System
            | K::ApiKey
            | K::Header(_)
            | K::Body(_)
            | K::Request(_)
            | K::Pinned
            | K::Proposed
            | K::OutcomeFailRate
            | K::OutcomeCount
            | K::BudgetUsed(_)
            | K::BudgetRemaining(_) => Vec::new(),
        }
    }

    /// Whether this expression or any subexpression satisfies `pred` (signals not expanded).
    pub fn any(&self, pred: &dyn Fn(&TExpr) -> bool) -> bool {
        pred(self) || self.children().into_iter().any(|c| c.any(pred))
    }
}
