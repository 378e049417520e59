//! The spanned abstract syntax tree of one `.sr` file.
//!
//! The tree records what was written, with a byte span on every node, and nothing of meaning:
//! names are not resolved and types are not known here (that is the compiler's job). Declaration
//! fields are typed (`url` is a string, `timeout` a duration) because the parser already knows
//! each declaration's shape; every field is optional in the tree so that a file missing a field
//! still yields a tree (the missing field is reported as a diagnostic) and later phases can keep
//! checking the rest.
//!
//! Two submodules work on any tree: [`shape`] compares trees ignoring spans ([`EqShape`]), and
//! [`visit`] and [`visit_mut`] walk them ([`visit::Visitor`], [`visit_mut::VisitorMut`]).

pub mod shape;
pub mod visit;
pub mod visit_mut;

pub use shape::EqShape;

use crate::span::{Span, Spanned};

/// An identifier as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A parsed `.sr` file: its declarations in source order and every comment in it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct File {
    pub items: Vec<Item>,
    /// All `#` comments in source order; the formatter re-attaches them by position.
    pub comments: Vec<Comment>,
}

/// A `#` comment; `text` excludes the `#` and the line ending.
#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: ItemKind,
    /// The whole declaration, keyword to closing brace.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ItemKind {
    Backend(Backend),
    Model(Model),
    Classifier(Classifier),
    Guard(Guard),
    Encoder(Encoder),
    Detector(Detector),
    Signal(Signal),
    Block(Block),
    Route(Route),
    Cache(Cache),
    Session(Session),
    Protect(Protect),
    Failure(Failure),
    Router(Router),
    Test(Test),
    Budget(Budget),
}

impl ItemKind {
    /// The declaration keyword.
    pub fn keyword(&self) -> &'static str {
        match self {
            ItemKind::Backend(_) => "backend",
            ItemKind::Model(_) => "model",
            ItemKind::Classifier(_) => "classifier",
            ItemKind::Guard(_) => "guard",
            ItemKind::Encoder(_) => "encoder",
            ItemKind::Detector(_) => "detector",
            ItemKind::Signal(_) => "signal",
            ItemKind::Block(_) => "block",
            ItemKind::Route(_) => "route",
            ItemKind::Cache(_) => "cache",
            ItemKind::Session(_) => "session",
            ItemKind::Protect(_) => "protect",
            ItemKind::Failure(_) => "failure",
            ItemKind::Router(_) => "router",
            ItemKind::Test(_) => "test",
            ItemKind::Budget(_) => "budget",
        }
    }

    /// The declared name, for named declarations.
    pub fn name(&self) -> Option<&Ident> {
        match self {
            ItemKind::Backend(d) => Some(&d.name),
            ItemKind::Model(d) => Some(&d.name),
            ItemKind::Classifier(d) => Some(&d.name),
            ItemKind::Guard(d) => Some(&d.name),
            ItemKind::Encoder(d) => Some(&d.name),
            ItemKind::Detector(d) => Some(&d.name),
            ItemKind::Signal(d) => Some(&d.name),
            ItemKind::Block(d) => Some(&d.name),
            ItemKind::Route(d) => Some(&d.name),
            ItemKind::Test(d) => Some(&d.name),
            ItemKind::Budget(d) => Some(&d.name),
            ItemKind::Cache(_)
            | ItemKind::Session(_)
            | ItemKind::Protect(_)
            | ItemKind::Failure(_)
            | ItemKind::Router(_) => None,
        }
    }
}

/// `env("NAME")`: a value read from the environment at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvRef {
    pub var: Spanned<String>,
    pub span: Span,
}

/// `backend NAME { url = ... catalog = ... api_key = env(...) timeout = ... simulated = true
/// client_auth = forward|drop api = openai|anthropic }`
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    pub name: Ident,
    pub url: Option<Spanned<String>>,
    pub catalog: Option<Spanned<String>>,
    pub api_key: Option<EnvRef>,
    pub timeout: Option<Spanned<Duration>>,
    pub simulated: Option<Spanned<bool>>,
    pub client_auth: Option<Spanned<ClientAuth>>,
    pub api: Option<Spanned<BackendApi>>,
}

/// Whether a client's credentials (`authorization`, `api-key`, `x-api-key`) reach a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    Forward,
    Drop,
}

/// `api = openai|anthropic`: the wire protocol a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendApi {
    /// OpenAI chat completions and Responses.
    #[default]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// `model NAME { backend = B serves = "id" aliases = [..] cost = N context = N tokenizer = ".." }`
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub name: Ident,
    pub backend: Option<Ident>,
    pub serves: Option<Spanned<String>>,
    pub aliases: Option<Spanned<Vec<Spanned<String>>>>,
    pub cost: Option<Spanned<Number>>,
    pub context: Option<Spanned<Number>>,
    pub tokenizer: Option<Spanned<String>>,
}

/// `device = auto|cpu|cuda`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Auto,
    Cpu,
    Cuda,
}

/// `classifier NAME { path = ".." labels = [a, b] device = .. window = N windows = N }`
#[derive(Debug, Clone, PartialEq)]
pub struct Classifier {
    pub name: Ident,
    pub path: Option<Spanned<String>>,
    pub labels: Option<Spanned<Vec<Ident>>>,
    pub device: Option<Spanned<Device>>,
    /// Most windows of one text the model reads.
    pub windows: Option<Spanned<Number>>,
    /// Tokens per window.
    pub window: Option<Spanned<Number>>,
}

/// `guard NAME { path = ".." positive = LABEL device = .. window = N windows = N }`
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    pub name: Ident,
    pub path: Option<Spanned<String>>,
    pub positive: Option<Ident>,
    pub device: Option<Spanned<Device>>,
    pub windows: Option<Spanned<Number>>,
    /// Tokens per window.
    pub window: Option<Spanned<Number>>,
}

/// `detector NAME { path = ".." entities = [A, B] threshold = 0.6 device = .. window = N
/// windows = N }`: a token-classification model whose calls ask whether an entity of some of
/// its types occurs in a text.
#[derive(Debug, Clone, PartialEq)]
pub struct Detector {
    pub name: Ident,
    pub path: Option<Spanned<String>>,
    /// The entity types calls may ask about (the model's `B-X`/`I-X` labels, without the prefix).
    pub entities: Option<Spanned<Vec<Ident>>>,
    /// The least entity score that counts as found.
    pub threshold: Option<Spanned<Number>>,
    pub device: Option<Spanned<Device>>,
    pub windows: Option<Spanned<Number>>,
    /// Tokens per window.
    pub window: Option<Spanned<Number>>,
}

/// `encoder NAME { path = ".." device = .. window = N windows = N }`
#[derive(Debug, Clone, PartialEq)]
pub struct Encoder {
    pub name: Ident,
    pub path: Option<Spanned<String>>,
    pub device: Option<Spanned<Device>>,
    pub windows: Option<Spanned<Number>>,
    /// Tokens per window.
    pub window: Option<Spanned<Number>>,
}

/// `signal NAME = EXPR`
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub name: Ident,
    pub expr: Expr,
}

/// What a block does when its condition holds.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockAction {
    /// Refuse: `[status = INT] [message = STRING]` (both optional).
    Refuse {
        status: Option<Spanned<Number>>,
        message: Option<Spanned<String>>,
    },
    /// `to MODEL`: send to an explicitly constrained model instead of refusing.
    Redirect { model: Ident },
}

/// `block NAME { when EXPR (status = .. message = .. | to MODEL) }`
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub name: Ident,
    pub when: Option<Expr>,
    pub action: BlockAction,
    /// `redact = ["type", ...]`: personal data replaced by placeholders in what a redirect sends.
    pub redact: Option<Spanned<Vec<RedactType>>>,
}

/// `system_prompt = "..."` or `system_prompt = replace "..."`.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemPrompt {
    pub text: Spanned<String>,
    pub replace: bool,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reasoning {
    Off,
    Low,
    Medium,
    High,
}

/// `tools = keep | none | only ["a", "b"]`
#[derive(Debug, Clone, PartialEq)]
pub enum Tools {
    Keep,
    None,
    Only(Vec<Spanned<String>>),
}

/// One `"name" = "value"` line of a route's `headers { }`.
#[derive(Debug, Clone, PartialEq)]
pub struct HeaderSet {
    pub name: Spanned<String>,
    pub value: Spanned<String>,
}

/// `route NAME [priority N] { [when EXPR] to MODEL [else MODEL...] plugins... }`
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub name: Ident,
    pub priority: Option<Spanned<Number>>,
    pub when: Option<Expr>,
    /// The `to` model; `None` only when the route body lacks `to` (reported by the parser).
    pub to: Option<Ident>,
    pub fallbacks: Vec<Ident>,
    pub system_prompt: Option<SystemPrompt>,
    pub headers: Option<Spanned<Vec<HeaderSet>>>,
    pub reasoning: Option<Spanned<Reasoning>>,
    pub tools: Option<Spanned<Tools>>,
    pub cache: Option<Spanned<bool>>,
    /// `redact = ["type", ...]`: personal data replaced by placeholders in what is forwarded.
    pub redact: Option<Spanned<Vec<RedactType>>>,
}

/// One entry of `redact`: a built-in personal data type, or a type a detector tags.
#[derive(Debug, Clone, PartialEq)]
pub enum RedactType {
    /// `"email"`: one of the `pii` recognizers' types.
    Pii(Spanned<String>),
    /// `people.PERSON`, or a bare `PERSON` that the checker finds among the detectors.
    Entity {
        detector: Option<Ident>,
        entity: Ident,
    },
}

impl RedactType {
    /// Where the entry is written.
    pub fn span(&self) -> Span {
        match self {
            RedactType::Pii(name) => name.span,
            RedactType::Entity {
                detector: Some(d),
                entity,
            } => d.span.to(entity.span),
            RedactType::Entity {
                detector: None,
                entity,
            } => entity.span,
        }
    }
}

/// `memory`, `redis("redis://...")`, `redis_cluster(["redis://...", ...])` or
/// `redis_sentinel(["redis://...", ...], master = "NAME")`.
#[derive(Debug, Clone, PartialEq)]
pub enum Store {
    Memory,
    Redis(Spanned<String>),
    /// A Redis Cluster reached through its seed nodes (the rest is discovered).
    Cluster(Spanned<Vec<Spanned<String>>>),
    /// A primary watched by Redis Sentinel: the sentinels and the name they know it by
    /// (`None` when `master = ` is missing; the checker reports it).
    Sentinel {
        sentinels: Spanned<Vec<Spanned<String>>>,
        master: Option<Spanned<String>>,
    },
    /// A Milvus vector database (cache answers only): its gRPC URL and its named options as
    /// written (`collection = "…"`; the checker reports any other name).
    Milvus {
        url: Spanned<String>,
        options: Vec<(Ident, Spanned<String>)>,
    },
}

/// `cache { encoder = E threshold = SCORE ttl = D store = S max_entries = N max_bytes = N
/// skip when EXPR }`
#[derive(Debug, Clone, PartialEq)]
pub struct Cache {
    pub encoder: Option<Ident>,
    pub threshold: Option<Spanned<Number>>,
    pub ttl: Option<Spanned<Duration>>,
    pub store: Option<Spanned<Store>>,
    /// Bounds of the memory store (whole numbers; the checker reports others).
    pub max_entries: Option<Spanned<Number>>,
    pub max_bytes: Option<Spanned<Number>>,
    pub skip_when: Option<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    Route,
    Reject,
}

/// `session { id = EXPR tenant = EXPR ttl = D store = S missing = route|reject
/// outcomes = any|admin|keys }`
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: Option<Expr>,
    pub tenant: Option<Expr>,
    pub ttl: Option<Spanned<Duration>>,
    pub store: Option<Spanned<Store>>,
    pub missing: Option<Spanned<Missing>>,
    pub outcomes: Option<Spanned<Outcomes>>,
}

/// Who may report outcomes (`POST /v1/router/outcomes`) for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcomes {
    /// Any client that knows the session id.
    Any,
    /// Only a caller with the admin token (`SRC_ADMIN_TOKEN`).
    Admin,
    /// Only a caller with one of the keys in `SRC_OUTCOME_KEYS`.
    Keys,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectMode {
    Observe,
    Enforce,
}

/// `hold "name" when EXPR`
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub name: Spanned<String>,
    pub when: Expr,
    pub span: Span,
}

/// What a call does when the model its session is pinned to fails it (`owner_lost = ..`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerLost {
    /// Answer 503 with `Retry-After`: the client retries on the same owner.
    Fail,
    /// Let the fallbacks answer, reported as a switch; the pin stays.
    Fallback,
    /// Let the fallbacks answer, reported as a switch, and move the pin to the one that did.
    Move,
}

/// `protect { mode = observe|enforce  owner_lost = fail|fallback|move  hold ".." when EXPR ... }`
#[derive(Debug, Clone, PartialEq)]
pub struct Protect {
    pub mode: Option<Spanned<ProtectMode>>,
    pub holds: Vec<Hold>,
    pub owner_lost: Option<Spanned<OwnerLost>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    Open,
    Closed,
}

/// `failure { classifier = open|closed store = .. backend = .. cooldown_after = N cooldown = D }`
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub classifier: Option<Spanned<FailMode>>,
    pub store: Option<Spanned<FailMode>>,
    pub backend: Option<Spanned<FailMode>>,
    /// Consecutive failures of a model that start its cooldown.
    pub cooldown_after: Option<Spanned<Number>>,
    /// How long a model that failed `cooldown_after` times in a row is skipped.
    pub cooldown: Option<Spanned<Duration>>,
}

/// `router { names = ["auto"] tokenizer = "tokenizer.json" anonymous = isolate|share }`
#[derive(Debug, Clone, PartialEq)]
pub struct Router {
    pub names: Option<Spanned<Vec<Spanned<String>>>>,
    pub tokenizer: Option<Spanned<String>>,
    /// Whether requests without a credential share cached answers and stored responses.
    pub anonymous: Option<Spanned<Anonymous>>,
}

/// Whose usage a budget counts (`per = ..`).
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetPer {
    /// `per = tenant`: the request's tenant, as sessions and the cache scope it.
    Tenant(Span),
    /// A `text?` expression: `header("x-team")`; a request it yields no text for is not counted.
    Expr(Expr),
}

/// What a request gets once its budget is spent (`exceeded = ..`).
#[derive(Debug, Clone, PartialEq)]
pub enum Exceeded {
    /// Refused with 429 and `Retry-After`.
    Reject,
    /// Proposed to this model instead, as a route proposes (`protect` holds apply).
    To(Ident),
    /// Counted and reported only.
    Observe,
}

/// `budget NAME { per = tenant|EXPR  window = D  requests|tokens|cost = N
/// exceeded = reject|to MODEL|observe }`
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub name: Ident,
    pub per: Option<BudgetPer>,
    pub window: Option<Spanned<Duration>>,
    pub requests: Option<Spanned<Number>>,
    pub tokens: Option<Spanned<Number>>,
    pub cost: Option<Spanned<Number>>,
    pub exceeded: Option<Spanned<Exceeded>>,
}

/// What requests that carry no credential may share (`router { anonymous = .. }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Anonymous {
    /// No cache reads or writes and no stored responses: nobody could tell two such clients apart.
    #[default]
    Isolate,
    /// One anonymous tenant for all of them: an open fleet that serves keyless clients alike.
    Share,
}

/// The input of a test case.
#[derive(Debug, Clone, PartialEq)]
pub enum TestInput {
    /// `prompt = "..."`
    Prompt(Spanned<String>),
    /// `messages = "file.json"`, relative to the test's file.
    Messages(Spanned<String>),
}

/// `given SIGNAL = VALUE`; the value is a literal expression (number, bool, string or label).
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    pub signal: Ident,
    pub value: Expr,
}

/// What a test expects.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    /// `expect ROUTE [model MODEL]`
    Route { route: Ident, model: Option<Ident> },
    /// `expect blocked BLOCK [model MODEL]`
    Blocked { block: Ident, model: Option<Ident> },
    /// `expect rejected BUDGET`: the budget (`exceeded = reject`) refuses the request.
    Rejected { budget: Ident },
}

/// `test NAME { prompt|messages  system  header ..  given ..  expect .. }`
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub name: Ident,
    pub input: Option<TestInput>,
    pub system: Option<Spanned<String>>,
    pub headers: Vec<HeaderSet>,
    pub givens: Vec<Given>,
    pub expect: Option<Spanned<Expectation>>,
}

/// A duration literal: `250ms`, `30s`, `10m`, `1h`, `7d`.
#[derive(Debug, Clone, PartialEq)]
pub struct Duration {
    pub millis: u64,
    /// The literal as written, kept so the formatter does not rewrite `10m` as `600s`.
    pub text: String,
}

/// A number literal: `42`, `0.7`, `8k`, `1.5M`.
#[derive(Debug, Clone, PartialEq)]
pub struct Number {
    pub value: f64,
    /// Written without a fractional part after applying any suffix (`42`, `8k`, `1.5M`).
    pub is_int: bool,
    /// The literal as written (`8k` stays `8k` through the formatter).
    pub text: String,
}

impl Number {
    /// The integer value, when the literal is integral and fits in `i64`.
    pub fn as_int(&self) -> Option<i64> {
        if self.is_int && self.value.abs() < 9.0e18 {
            Some(self.value as i64)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Coalesce,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinOp {
    /// Binding strength; higher binds tighter. `or` < `and` < `??`-free comparisons < `??` <
    /// `+ -` < `* /`. `not` binds tighter than `and` but looser than comparisons.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Coalesce => 5,
            BinOp::Add | BinOp::Sub => 6,
            BinOp::Mul | BinOp::Div => 7,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Coalesce => "??",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Bool(bool),
    Number(Number),
    Str(String),
    /// Only meaningful in declaration fields; rejected by the type checker in expressions.
    Duration(Duration),
    /// `[a, b, "c"]`, the argument form of `contains`, `in`, etc.
    List(Vec<Expr>),
    /// A bare name: a signal, `prompt`/`history`/`system`/`api_key`/`request`, `pinned`,
    /// `proposed`, or a label (resolved by the compiler from context).
    Name(Ident),
    /// `e.field`: `request.tools`, `topic.confidence`, `pinned.cost`, `outcomes(pinned).count`.
    Field(Box<Expr>, Ident),
    /// `f(args)`: a builtin (`contains`, `header`, ...) or a classifier/guard call.
    Call(Ident, Vec<Expr>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `e is LABEL`
    Is(Box<Expr>, Ident),
    /// `e in [LABEL, ...]`
    In(Box<Expr>, Vec<Ident>),
    /// `( e )`, kept so spans and the formatter can respect the author's grouping.
    Paren(Box<Expr>),
}
