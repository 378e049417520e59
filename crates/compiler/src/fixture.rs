//! Checked policies built directly, without the parser: small constructors for typed
//! expressions and a builder with a fixed catalog (two models, one classifier `domain`, one
//! guard, one encoder, one detector `people`; more models on request), and one worked example, [`routing_example`].
//!
//! For tests and benchmarks only: unit tests see it as `crate::fixture`; integration tests and
//! benches get it through the `fixtures` feature, which the crate's dev-dependency on itself
//! turns on. Nothing checks these policies, so a builder can say what the checker would refuse.

use crate::hir::*;
use src_dsl::ast::{Device, FailMode};
use src_dsl::{FileId, SourceMap, Span};
use std::path::PathBuf;

pub const SMALL: ModelId = ModelId(0);
pub const STRONG: ModelId = ModelId(1);
pub const DOMAIN: ClassifierId = ClassifierId(0);
pub const GUARD: GuardId = GuardId(0);
pub const ENCODER: EncoderId = EncoderId(0);
pub const DETECTOR: DetectorId = DetectorId(0);
pub const MATH: LabelId = LabelId(0);
pub const CODE: LabelId = LabelId(1);
pub const LAW: LabelId = LabelId(2);

pub fn sp(start: usize, end: usize) -> Span {
    Span::new(FileId(0), start, end)
}

pub fn ex(kind: TExprKind, ty: Type) -> TExpr {
    TExpr {
        kind,
        ty,
        span: Span::default(),
    }
}

pub fn at(mut e: TExpr, start: usize, end: usize) -> TExpr {
    e.span = sp(start, end);
    e
}

pub fn b(v: bool) -> TExpr {
    ex(TExprKind::Bool(v), Type::Bool)
}

pub fn int(v: i64) -> TExpr {
    ex(TExprKind::Int(v), Type::Int)
}

pub fn float(v: f64) -> TExpr {
    ex(TExprKind::Float(v), Type::Float)
}

pub fn s(v: &str) -> TExpr {
    ex(TExprKind::Str(v.into()), Type::Text)
}

pub fn prompt() -> TExpr {
    ex(TExprKind::Prompt, Type::Text)
}

pub fn history() -> TExpr {
    ex(TExprKind::History, Type::Text)
}

pub fn system() -> TExpr {
    ex(TExprKind::System, Type::Text)
}

pub fn header(name: &str) -> TExpr {
    ex(TExprKind::Header(name.into()), Type::OptText)
}

pub fn sig(id: SignalId, ty: Type) -> TExpr {
    ex(TExprKind::Signal(id), ty)
}

pub fn and(a: TExpr, b: TExpr) -> TExpr {
    ex(TExprKind::And(Box::new(a), Box::new(b)), Type::Bool)
}

pub fn or(a: TExpr, b: TExpr) -> TExpr {
    ex(TExprKind::Or(Box::new(a), Box::new(b)), Type::Bool)
}

pub fn not(a: TExpr) -> TExpr {
    ex(TExprKind::Not(Box::new(a)), Type::Bool)
}

pub fn cmp(op: CmpOp, a: TExpr, b: TExpr) -> TExpr {
    ex(TExprKind::Cmp(op, Box::new(a), Box::new(b)), Type::Bool)
}

pub fn neg(a: TExpr) -> TExpr {
    let ty = a.ty;
    ex(TExprKind::Neg(Box::new(a)), ty)
}

pub fn arith(op: ArithOp, a: TExpr, b: TExpr) -> TExpr {
    let ty = if a.ty == Type::Int && b.ty == Type::Int {
        Type::Int
    } else {
        Type::Float
    };
    ex(TExprKind::Arith(op, Box::new(a), Box::new(b)), ty)
}

pub fn request(f: RequestField) -> TExpr {
    let ty = match f {
        RequestField::Stream | RequestField::ToolLoop | RequestField::ProviderState => Type::Bool,
        _ => Type::Int,
    };
    ex(TExprKind::Request(f), ty)
}

pub fn contains(text: TExpr, phrases: &[&str]) -> TExpr {
    let phrases = phrases.iter().map(|p| p.to_string()).collect();
    ex(
        TExprKind::Contains {
            text: Box::new(text),
            phrases,
        },
        Type::Bool,
    )
}

pub fn tokens(text: TExpr) -> TExpr {
    ex(TExprKind::Tokens(Box::new(text)), Type::Int)
}

pub fn classify(text: TExpr) -> TExpr {
    ex(
        TExprKind::Classify(DOMAIN, Box::new(text)),
        Type::Class(ClassSet::Classifier(DOMAIN)),
    )
}

pub fn guard(text: TExpr) -> TExpr {
    ex(TExprKind::Guard(GUARD, Box::new(text)), Type::Score)
}

/// `people(text, [entities])`: the fixture detector's call.
pub fn detect(text: TExpr, entities: &[&str]) -> TExpr {
    ex(
        TExprKind::Detect {
            detector: DETECTOR,
            text: Box::new(text),
            entities: entities.iter().map(|e| e.to_string()).collect(),
        },
        Type::Bool,
    )
}

pub fn similarity(text: TExpr, examples: &[&str]) -> TExpr {
    ex(
        TExprKind::Similarity {
            encoder: ENCODER,
            text: Box::new(text),
            examples: examples.iter().map(|e| e.to_string()).collect(),
        },
        Type::Score,
    )
}

pub fn is(e: TExpr, labels: &[LabelId]) -> TExpr {
    ex(TExprKind::IsLabel(Box::new(e), labels.to_vec()), Type::Bool)
}

pub fn label(l: LabelId) -> TExpr {
    ex(
        TExprKind::Label(l),
        Type::Class(ClassSet::Classifier(DOMAIN)),
    )
}

pub fn confidence(e: TExpr) -> TExpr {
    ex(TExprKind::Confidence(Box::new(e)), Type::Score)
}

pub fn model(m: ModelId) -> TExpr {
    ex(TExprKind::Model(m), Type::Model)
}

pub fn pinned() -> TExpr {
    ex(TExprKind::Pinned, Type::Model)
}

pub fn proposed() -> TExpr {
    ex(TExprKind::Proposed, Type::Model)
}

/// `m.cost`.
pub fn cost(m: TExpr) -> TExpr {
    ex(TExprKind::Cost(Box::new(m)), Type::Float)
}

pub struct PolicyBuilder {
    pub policy: CheckedPolicy,
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        Self::new()
    }
}

fn model_def(name: &str, cost: f64) -> ModelDef {
    let serves = format!("org/{name}");
    ModelDef {
        name: name.into(),
        span: Span::default(),
        backend: BackendId(0),
        // Nothing checks a fixture: a name no header can carry gets an empty one.
        served_header: HeaderValue::from_str(&serves).unwrap_or(HeaderValue::from_static("")),
        serves,
        aliases: vec![],
        cost,
        context: None,
        tokenizer: None,
    }
}

impl PolicyBuilder {
    pub fn new() -> Self {
        let policy = CheckedPolicy {
            sources: SourceMap::new(),
            root: PathBuf::from("."),
            backends: vec![BackendDef {
                name: "local".into(),
                span: Span::default(),
                url: "http://127.0.0.1:1/v1".into(),
                catalog: None,
                api_key_env: None,
                timeout_ms: None,
                simulated: true,
                forward_client_auth: true,
                api: src_dsl::ast::BackendApi::OpenAi,
            }],
            models: vec![model_def("small", 0.1), model_def("strong", 1.0)],
            classifiers: vec![ClassifierDef {
                name: "domain".into(),
                span: Span::default(),
                path: PathBuf::from("models/domain"),
                labels: ["math", "code", "law", "other"].map(String::from).to_vec(),
                device: Device::Cpu,
                windows: crate::hir::DEFAULT_WINDOWS,
                window: None,
            }],
            guards: vec![GuardDef {
                name: "prompt_guard".into(),
                span: Span::default(),
                path: PathBuf::from("models/guard"),
                positive: None,
                unsafe_label: Some("injection".into()),
                device: Device::Cpu,
                windows: crate::hir::DEFAULT_WINDOWS,
                window: Some(crate::hir::DETECTOR_WINDOW),
            }],
            encoders: vec![EncoderDef {
                name: "minilm".into(),
                span: Span::default(),
                path: PathBuf::from("models/minilm"),
                device: Device::Cpu,
                windows: crate::hir::DEFAULT_WINDOWS,
                window: Some(crate::hir::DETECTOR_WINDOW),
            }],
            detectors: vec![DetectorDef {
                name: "people".into(),
                span: Span::default(),
                path: PathBuf::from("models/pii_ner"),
                entities: vec!["PERSON".into(), "LOCATION".into()],
                threshold: 0.6,
                device: Device::Cpu,
                windows: crate::hir::DEFAULT_WINDOWS,
                window: None,
            }],
            signals: vec![],
            blocks: vec![],
            routes: vec![],
            cache: None,
            session: None,
            protect: None,
            failure: FailureDef {
                classifier: None,
                store: FailMode::Open,
                backend: FailMode::Closed,
                cooldown: None,
            },
            router: RouterDef {
                names: vec!["auto".into()],
                tokenizer: None,
                anonymous: src_dsl::ast::Anonymous::Isolate,
            },
            tests: vec![],
            budgets: vec![],
        };
        PolicyBuilder { policy }
    }

    /// Adds a model after [`SMALL`] and [`STRONG`], served by the one backend.
    pub fn model(&mut self, name: &str, cost: f64) -> ModelId {
        self.policy.models.push(model_def(name, cost));
        ModelId(self.policy.models.len() as u32 - 1)
    }

    pub fn signal(&mut self, name: &str, expr: TExpr) -> SignalId {
        self.policy.signals.push(SignalDef {
            name: name.into(),
            span: Span::default(),
            expr,
        });
        SignalId(self.policy.signals.len() as u32 - 1)
    }

    pub fn block(&mut self, name: &str, when: TExpr) -> &mut Self {
        self.policy.blocks.push(BlockDef {
            name: name.into(),
            span: Span::default(),
            when,
            action: BlockActionDef::Refuse {
                status: 403,
                message: None,
            },
            redact: None,
        });
        self
    }

    /// Routes are added in scan order (descending priority); `None` is the default.
    pub fn route(&mut self, name: &str, when: Option<TExpr>, to: ModelId) -> &mut Self {
        let priority = when
            .as_ref()
            .map(|_| 1000 - self.policy.routes.len() as i64);
        self.policy.routes.push(RouteDef {
            name: name.into(),
            span: sp(0, 1),
            priority,
            when,
            to,
            fallbacks: vec![],
            system_prompt: None,
            headers: vec![],
            header_fields: vec![],
            reasoning: None,
            tools: ToolsDef::Keep,
            cache: true,
            redact: None,
        });
        self
    }

    pub fn hold(&mut self, name: &str, when: TExpr) -> &mut Self {
        let protect = self.policy.protect.get_or_insert(ProtectDef {
            mode: src_dsl::ast::ProtectMode::Enforce,
            holds: vec![],
            owner_lost: None,
        });
        protect.holds.push(HoldDef {
            name: name.into(),
            span: Span::default(),
            when,
        });
        self
    }

    pub fn skip_cache_when(&mut self, when: TExpr) -> &mut Self {
        self.policy.cache = Some(CacheDef {
            encoder: ENCODER,
            threshold: 0.9,
            ttl_ms: None,
            store: StoreDef::Memory,
            max_entries: None,
            max_bytes: None,
            skip_when: Some(when),
        });
        self
    }

    pub fn build(&self) -> CheckedPolicy {
        self.policy.clone()
    }
}

/// The routing policy of `tests/corpus/parse/ok/spec_routing.sr`, plus a cache skip.
pub fn routing_example() -> CheckedPolicy {
    let class = Type::Class(ClassSet::Classifier(DOMAIN));
    let mut pb = PolicyBuilder::new();
    let topic = pb.signal("topic", classify(prompt()));
    let attack = pb.signal("attack", guard(prompt()));
    let code_talk = pb.signal(
        "code_talk",
        contains(prompt(), &["stack trace", "compile error", "segfault"]),
    );
    pb.block(
        "jailbreak",
        cmp(CmpOp::Gt, sig(attack, Type::Score), float(0.7)),
    )
    .route(
        "hard_math",
        Some(and(
            is(sig(topic, class), &[MATH]),
            cmp(CmpOp::Gt, tokens(history()), int(2000)),
        )),
        STRONG,
    )
    .route(
        "coding",
        Some(or(
            is(sig(topic, class), &[CODE]),
            sig(code_talk, Type::Bool),
        )),
        STRONG,
    )
    .route("default", None, SMALL)
    .hold("tool call in flight", request(RequestField::ToolLoop))
    .skip_cache_when(cmp(CmpOp::Eq, header("x-no-cache"), s("1")));
    pb.build()
}
