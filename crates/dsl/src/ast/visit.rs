//! Walking a tree: the [`Visitor`] trait, one method per kind of node, each defaulting to a
//! `walk_*` function that visits the node's children in source-grammar order.
//!
//! A pass overrides the methods of the nodes it cares about and calls the matching `walk_*`
//! from its override to keep descending (the `syn` and rust-analyzer habit), so it never has to
//! spell out the whole tree itself. Declaration fields are visited one at a time as a [`Field`]:
//! the key they are written under and a typed reference to their value, so a pass can treat all
//! fields alike (a span check, a dump) or pick the ones it needs.
//!
//! The same trait over `&mut` references is `VisitorMut` (in `ast::visit_mut`); both are generated
//! from the one description below, so they cannot drift apart.

use super::*;

/// Visits each optional field of a declaration that is present, under its own name as the key,
/// as the [`FieldValue`] variant given beside it; `$as` is `as_ref` or `as_mut`.
macro_rules! optional_fields {
    ($v:ident, $d:ident.$as:ident { $($name:ident: $form:ident,)* }) => {
        $(
            if let Some(x) = $d.$name.$as() {
                field($v, stringify!($name), FieldValue::$form(x));
            }
        )*
    };
}

/// Generates a visitor trait, its `walk_*` functions and its [`Field`] type over `&`
/// (`as_ref`) or `&mut` (`as_mut, mut`) references.
macro_rules! visitor {
    ($Visitor:ident, $as:ident $(, $m:tt)?) => {
        /// One field of a declaration as a visitor sees it.
        pub struct Field<'a> {
            /// The key or statement keyword it is written under: `url`, `when`, `to`, `else`,
            /// `skip` (for `skip when`), `prompt`, `expect`, `priority`, and so on.
            pub key: &'static str,
            pub value: FieldValue<'a>,
        }

        /// The value of a [`Field`], by the form it takes in the language.
        pub enum FieldValue<'a> {
            /// A name: `backend = local`, `positive = injection`, `to small`.
            Name(&'a $($m)? Ident),
            /// The `else` models of a route (never empty when visited).
            Names(&'a $($m)? Vec<Ident>),
            /// `labels = [a, b]`.
            Labels(&'a $($m)? Spanned<Vec<Ident>>),
            Str(&'a $($m)? Spanned<String>),
            /// `aliases = ["a"]`, `names = ["auto"]`.
            Strings(&'a $($m)? Spanned<Vec<Spanned<String>>>),
            /// `redact = ["email", people.PERSON]`.
            Redact(&'a $($m)? Spanned<Vec<RedactType>>),
            Number(&'a $($m)? Spanned<Number>),
            Duration(&'a $($m)? Spanned<Duration>),
            Bool(&'a $($m)? Spanned<bool>),
            Env(&'a $($m)? EnvRef),
            Device(&'a $($m)? Spanned<Device>),
            /// `api = openai|anthropic`.
            BackendApi(&'a $($m)? Spanned<BackendApi>),
            Reasoning(&'a $($m)? Spanned<Reasoning>),
            Missing(&'a $($m)? Spanned<Missing>),
            ClientAuth(&'a $($m)? Spanned<ClientAuth>),
            Outcomes(&'a $($m)? Spanned<Outcomes>),
            Mode(&'a $($m)? Spanned<ProtectMode>),
            OwnerLost(&'a $($m)? Spanned<OwnerLost>),
            FailMode(&'a $($m)? Spanned<FailMode>),
            /// `anonymous = isolate|share`.
            Anonymous(&'a $($m)? Spanned<Anonymous>),
            /// A budget's `exceeded = reject|observe|to MODEL`.
            Exceeded(&'a $($m)? Spanned<Exceeded>),
            Store(&'a $($m)? Spanned<Store>),
            Tools(&'a $($m)? Spanned<Tools>),
            Headers(&'a $($m)? Spanned<Vec<HeaderSet>>),
            SystemPrompt(&'a $($m)? SystemPrompt),
            /// A condition or value: `when`, `skip when`, `id`, `tenant`.
            Expr(&'a $($m)? Expr),
            Expect(&'a $($m)? Spanned<Expectation>),
        }

        impl FieldValue<'_> {
            /// Where the value was written; `None` for the `else` list, which has no span of
            /// its own.
            pub fn span(&self) -> Option<Span> {
                Some(match self {
                    FieldValue::Name(x) => x.span,
                    FieldValue::Names(_) => return None,
                    FieldValue::Labels(x) => x.span,
                    FieldValue::Str(x) => x.span,
                    FieldValue::Strings(x) => x.span,
                    FieldValue::Redact(x) => x.span,
                    FieldValue::Number(x) => x.span,
                    FieldValue::Duration(x) => x.span,
                    FieldValue::Bool(x) => x.span,
                    FieldValue::Env(x) => x.span,
                    FieldValue::Device(x) => x.span,
                    FieldValue::BackendApi(x) => x.span,
                    FieldValue::Reasoning(x) => x.span,
                    FieldValue::Missing(x) => x.span,
                    FieldValue::ClientAuth(x) => x.span,
                    FieldValue::Outcomes(x) => x.span,
                    FieldValue::Mode(x) => x.span,
                    FieldValue::OwnerLost(x) => x.span,
                    FieldValue::FailMode(x) => x.span,
                    FieldValue::Anonymous(x) => x.span,
                    FieldValue::Exceeded(x) => x.span,
                    FieldValue::Store(x) => x.span,
                    FieldValue::Tools(x) => x.span,
                    FieldValue::Headers(x) => x.span,
                    FieldValue::SystemPrompt(x) => x.span,
                    FieldValue::Expr(x) => x.span,
                    FieldValue::Expect(x) => x.span,
                })
            }
        }

        /// A pass over a tree; every method defaults to walking the node's children.
        pub trait $Visitor {
            fn visit_file(&mut self, file: &$($m)? File) {
                walk_file(self, file)
            }
            fn visit_comment(&mut self, comment: &$($m)? Comment) {
                walk_comment(self, comment)
            }
            fn visit_item(&mut self, item: &$($m)? Item) {
                walk_item(self, item)
            }
            fn visit_backend(&mut self, decl: &$($m)? Backend) {
                walk_backend(self, decl)
            }
            fn visit_model(&mut self, decl: &$($m)? Model) {
                walk_model(self, decl)
            }
            fn visit_classifier(&mut self, decl: &$($m)? Classifier) {
                walk_classifier(self, decl)
            }
            fn visit_guard(&mut self, decl: &$($m)? Guard) {
                walk_guard(self, decl)
            }
            fn visit_encoder(&mut self, decl: &$($m)? Encoder) {
                walk_encoder(self, decl)
            }
            fn visit_detector(&mut self, decl: &$($m)? Detector) {
                walk_detector(self, decl)
            }
            fn visit_signal(&mut self, decl: &$($m)? Signal) {
                walk_signal(self, decl)
            }
            fn visit_block(&mut self, decl: &$($m)? Block) {
                walk_block(self, decl)
            }
            fn visit_block_action(&mut self, action: &$($m)? BlockAction) {
                walk_block_action(self, action)
            }
            fn visit_route(&mut self, decl: &$($m)? Route) {
                walk_route(self, decl)
            }
            fn visit_cache(&mut self, decl: &$($m)? Cache) {
                walk_cache(self, decl)
            }
            fn visit_session(&mut self, decl: &$($m)? Session) {
                walk_session(self, decl)
            }
            fn visit_protect(&mut self, decl: &$($m)? Protect) {
                walk_protect(self, decl)
            }
            fn visit_failure(&mut self, decl: &$($m)? Failure) {
                walk_failure(self, decl)
            }
            fn visit_router(&mut self, decl: &$($m)? Router) {
                walk_router(self, decl)
            }
            fn visit_test(&mut self, decl: &$($m)? Test) {
                walk_test(self, decl)
            }
            fn visit_budget(&mut self, decl: &$($m)? Budget) {
                walk_budget(self, decl)
            }
            /// Every field of every declaration that is present in the tree.
            fn visit_field(&mut self, field: Field<'_>) {
                walk_field(self, field)
            }
            fn visit_env_ref(&mut self, env: &$($m)? EnvRef) {
                walk_env_ref(self, env)
            }
            fn visit_system_prompt(&mut self, prompt: &$($m)? SystemPrompt) {
                walk_system_prompt(self, prompt)
            }
            /// A `"name" = "value"` of a route's `headers { }` or a test's `header`.
            fn visit_header(&mut self, header: &$($m)? HeaderSet) {
                walk_header(self, header)
            }
            fn visit_store(&mut self, store: &$($m)? Store) {
                walk_store(self, store)
            }
            fn visit_tools(&mut self, tools: &$($m)? Tools) {
                walk_tools(self, tools)
            }
            fn visit_hold(&mut self, hold: &$($m)? Hold) {
                walk_hold(self, hold)
            }
            fn visit_given(&mut self, given: &$($m)? Given) {
                walk_given(self, given)
            }
            fn visit_expectation(&mut self, expect: &$($m)? Expectation) {
                walk_expectation(self, expect)
            }
            fn visit_expr(&mut self, expr: &$($m)? Expr) {
                walk_expr(self, expr)
            }
            /// Every identifier: declared names, references, labels, functions, fields.
            fn visit_ident(&mut self, ident: &$($m)? Ident) {
                walk_ident(self, ident)
            }
            /// Every string literal of a declaration (not those inside expressions, which are
            /// [`ExprKind::Str`] and have no span of their own).
            fn visit_string(&mut self, string: &$($m)? Spanned<String>) {
                walk_string(self, string)
            }
            /// Every span in the tree, each once, after the node it belongs to is entered.
            fn visit_span(&mut self, _span: &$($m)? Span) {}
        }

        fn field<V: $Visitor + ?Sized>(v: &mut V, key: &'static str, value: FieldValue<'_>) {
            v.visit_field(Field { key, value });
        }

        /// Items in order, then comments in order.
        pub fn walk_file<V: $Visitor + ?Sized>(v: &mut V, file: &$($m)? File) {
            for item in &$($m)? file.items {
                v.visit_item(item);
            }
            for comment in &$($m)? file.comments {
                v.visit_comment(comment);
            }
        }

        pub fn walk_comment<V: $Visitor + ?Sized>(v: &mut V, comment: &$($m)? Comment) {
            v.visit_span(&$($m)? comment.span);
        }

        pub fn walk_ident<V: $Visitor + ?Sized>(v: &mut V, ident: &$($m)? Ident) {
            v.visit_span(&$($m)? ident.span);
        }

        pub fn walk_string<V: $Visitor + ?Sized>(v: &mut V, string: &$($m)? Spanned<String>) {
            v.visit_span(&$($m)? string.span);
        }

        /// The item's span, then its declaration.
        pub fn walk_item<V: $Visitor + ?Sized>(v: &mut V, item: &$($m)? Item) {
            v.visit_span(&$($m)? item.span);
            match &$($m)? item.kind {
                ItemKind::Backend(d) => v.visit_backend(d),
                ItemKind::Model(d) => v.visit_model(d),
                ItemKind::Classifier(d) => v.visit_classifier(d),
                ItemKind::Guard(d) => v.visit_guard(d),
                ItemKind::Encoder(d) => v.visit_encoder(d),
                ItemKind::Detector(d) => v.visit_detector(d),
                ItemKind::Signal(d) => v.visit_signal(d),
                ItemKind::Block(d) => v.visit_block(d),
                ItemKind::Route(d) => v.visit_route(d),
                ItemKind::Cache(d) => v.visit_cache(d),
                ItemKind::Session(d) => v.visit_session(d),
                ItemKind::Protect(d) => v.visit_protect(d),
                ItemKind::Failure(d) => v.visit_failure(d),
                ItemKind::Router(d) => v.visit_router(d),
                ItemKind::Test(d) => v.visit_test(d),
                ItemKind::Budget(d) => v.visit_budget(d),
            }
        }

        pub fn walk_backend<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Backend) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                url: Str,
                catalog: Str,
                api_key: Env,
                timeout: Duration,
                simulated: Bool,
                client_auth: ClientAuth,
                api: BackendApi,
            });
        }

        pub fn walk_model<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Model) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                backend: Name,
                serves: Str,
                aliases: Strings,
                cost: Number,
                context: Number,
                tokenizer: Str,
            });
        }

        pub fn walk_classifier<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Classifier) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                path: Str,
                labels: Labels,
                device: Device,
                window: Number,
                windows: Number,
            });
        }

        pub fn walk_guard<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Guard) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                path: Str,
                positive: Name,
                device: Device,
                window: Number,
                windows: Number,
            });
        }

        pub fn walk_detector<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Detector) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                path: Str,
                entities: Labels,
                threshold: Number,
                device: Device,
                window: Number,
                windows: Number,
            });
        }

        pub fn walk_encoder<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Encoder) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                path: Str,
                device: Device,
                window: Number,
                windows: Number,
            });
        }

        /// The name, then the expression (a signal has no fields).
        pub fn walk_signal<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Signal) {
            v.visit_ident(&$($m)? d.name);
            v.visit_expr(&$($m)? d.expr);
        }

        pub fn walk_block<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Block) {
            v.visit_ident(&$($m)? d.name);
            if let Some(x) = &$($m)? d.when {
                field(v, "when", FieldValue::Expr(x));
            }
            v.visit_block_action(&$($m)? d.action);
            if let Some(x) = &$($m)? d.redact {
                field(v, "redact", FieldValue::Redact(x));
            }
        }

        /// `status` and `message` of a refusal, or the `to` model of a redirect.
        pub fn walk_block_action<V: $Visitor + ?Sized>(v: &mut V, action: &$($m)? BlockAction) {
            match action {
                BlockAction::Refuse { status, message } => {
                    if let Some(x) = status {
                        field(v, "status", FieldValue::Number(x));
                    }
                    if let Some(x) = message {
                        field(v, "message", FieldValue::Str(x));
                    }
                }
                BlockAction::Redirect { model } => field(v, "to", FieldValue::Name(model)),
            }
        }

        pub fn walk_route<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Route) {
            v.visit_ident(&$($m)? d.name);
            $crate::ast::visit::optional_fields!(v, d.$as {
                priority: Number,
                when: Expr,
                to: Name,
            });
            if !d.fallbacks.is_empty() {
                field(v, "else", FieldValue::Names(&$($m)? d.fallbacks));
            }
            $crate::ast::visit::optional_fields!(v, d.$as {
                system_prompt: SystemPrompt,
                headers: Headers,
                reasoning: Reasoning,
                tools: Tools,
                cache: Bool,
                redact: Redact,
            });
        }

        pub fn walk_cache<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Cache) {
            if let Some(x) = &$($m)? d.encoder {
                field(v, "encoder", FieldValue::Name(x));
            }
            if let Some(x) = &$($m)? d.threshold {
                field(v, "threshold", FieldValue::Number(x));
            }
            if let Some(x) = &$($m)? d.ttl {
                field(v, "ttl", FieldValue::Duration(x));
            }
            if let Some(x) = &$($m)? d.store {
                field(v, "store", FieldValue::Store(x));
            }
            if let Some(x) = &$($m)? d.max_entries {
                field(v, "max_entries", FieldValue::Number(x));
            }
            if let Some(x) = &$($m)? d.max_bytes {
                field(v, "max_bytes", FieldValue::Number(x));
            }
            if let Some(x) = &$($m)? d.skip_when {
                field(v, "skip", FieldValue::Expr(x));
            }
        }

        pub fn walk_session<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Session) {
            $crate::ast::visit::optional_fields!(v, d.$as {
                id: Expr,
                tenant: Expr,
                ttl: Duration,
                store: Store,
                missing: Missing,
                outcomes: Outcomes,
            });
        }

        /// `mode`, `owner_lost`, then every `hold` in order.
        pub fn walk_protect<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Protect) {
            $crate::ast::visit::optional_fields!(v, d.$as {
                mode: Mode,
                owner_lost: OwnerLost,
            });
            for hold in &$($m)? d.holds {
                v.visit_hold(hold);
            }
        }

        pub fn walk_failure<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Failure) {
            $crate::ast::visit::optional_fields!(v, d.$as {
                classifier: FailMode,
                store: FailMode,
                backend: FailMode,
                cooldown_after: Number,
                cooldown: Duration,
            });
        }

        /// The name, `per` (when an expression), `window`, the limits, then `exceeded`.
        pub fn walk_budget<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Budget) {
            v.visit_ident(&$($m)? d.name);
            match &$($m)? d.per {
                Some(BudgetPer::Expr(x)) => field(v, "per", FieldValue::Expr(x)),
                Some(BudgetPer::Tenant(x)) => v.visit_span(x),
                None => {}
            }
            $crate::ast::visit::optional_fields!(v, d.$as {
                window: Duration,
                requests: Number,
                tokens: Number,
                cost: Number,
                exceeded: Exceeded,
            });
        }

        pub fn walk_router<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Router) {
            $crate::ast::visit::optional_fields!(v, d.$as {
                names: Strings,
                tokenizer: Str,
                anonymous: Anonymous,
            });
        }

        /// The name, the input (`prompt` or `messages`), `system`, every `header` and `given` in
        /// order, then `expect`.
        pub fn walk_test<V: $Visitor + ?Sized>(v: &mut V, d: &$($m)? Test) {
            v.visit_ident(&$($m)? d.name);
            match &$($m)? d.input {
                Some(TestInput::Prompt(x)) => field(v, "prompt", FieldValue::Str(x)),
                Some(TestInput::Messages(x)) => field(v, "messages", FieldValue::Str(x)),
                None => {}
            }
            if let Some(x) = &$($m)? d.system {
                field(v, "system", FieldValue::Str(x));
            }
            for header in &$($m)? d.headers {
                v.visit_header(header);
            }
            for given in &$($m)? d.givens {
                v.visit_given(given);
            }
            if let Some(x) = &$($m)? d.expect {
                field(v, "expect", FieldValue::Expect(x));
            }
        }

        /// What a field's value holds: names, strings, parts with children, expressions. The
        /// span of a `Spanned` value is visited here; a value that is a node (a name, a string,
        /// an expression, `env(..)`, a system prompt) visits its own.
        pub fn walk_field<V: $Visitor + ?Sized>(v: &mut V, field: Field<'_>) {
            match field.value {
                FieldValue::Name(x) => v.visit_ident(x),
                FieldValue::Names(xs) => {
                    for x in xs {
                        v.visit_ident(x);
                    }
                }
                FieldValue::Labels(xs) => {
                    v.visit_span(&$($m)? xs.span);
                    for x in &$($m)? xs.value {
                        v.visit_ident(x);
                    }
                }
                FieldValue::Str(x) => v.visit_string(x),
                FieldValue::Strings(xs) => {
                    v.visit_span(&$($m)? xs.span);
                    for x in &$($m)? xs.value {
                        v.visit_string(x);
                    }
                }
                FieldValue::Redact(xs) => {
                    v.visit_span(&$($m)? xs.span);
                    for x in &$($m)? xs.value {
                        match x {
                            RedactType::Pii(name) => v.visit_string(name),
                            RedactType::Entity { detector, entity } => {
                                if let Some(d) = detector {
                                    v.visit_ident(d);
                                }
                                v.visit_ident(entity);
                            }
                        }
                    }
                }
                FieldValue::Number(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Duration(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Bool(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Device(x) => v.visit_span(&$($m)? x.span),
                FieldValue::BackendApi(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Reasoning(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Missing(x) => v.visit_span(&$($m)? x.span),
                FieldValue::ClientAuth(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Outcomes(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Mode(x) => v.visit_span(&$($m)? x.span),
                FieldValue::OwnerLost(x) => v.visit_span(&$($m)? x.span),
                FieldValue::FailMode(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Anonymous(x) => v.visit_span(&$($m)? x.span),
                FieldValue::Exceeded(x) => {
                    v.visit_span(&$($m)? x.span);
                    if let Exceeded::To(model) = &$($m)? x.value {
                        v.visit_ident(model);
                    }
                }
                FieldValue::Env(x) => v.visit_env_ref(x),
                FieldValue::Store(x) => {
                    v.visit_span(&$($m)? x.span);
                    v.visit_store(&$($m)? x.value);
                }
                FieldValue::Tools(x) => {
                    v.visit_span(&$($m)? x.span);
                    v.visit_tools(&$($m)? x.value);
                }
                FieldValue::Headers(xs) => {
                    v.visit_span(&$($m)? xs.span);
                    for x in &$($m)? xs.value {
                        v.visit_header(x);
                    }
                }
                FieldValue::SystemPrompt(x) => v.visit_system_prompt(x),
                FieldValue::Expr(x) => v.visit_expr(x),
                FieldValue::Expect(x) => {
                    v.visit_span(&$($m)? x.span);
                    v.visit_expectation(&$($m)? x.value);
                }
            }
        }

        pub fn walk_env_ref<V: $Visitor + ?Sized>(v: &mut V, env: &$($m)? EnvRef) {
            v.visit_span(&$($m)? env.span);
            v.visit_string(&$($m)? env.var);
        }

        pub fn walk_system_prompt<V: $Visitor + ?Sized>(v: &mut V, prompt: &$($m)? SystemPrompt) {
            v.visit_span(&$($m)? prompt.span);
            v.visit_string(&$($m)? prompt.text);
        }

        pub fn walk_header<V: $Visitor + ?Sized>(v: &mut V, header: &$($m)? HeaderSet) {
            v.visit_string(&$($m)? header.name);
            v.visit_string(&$($m)? header.value);
        }

        pub fn walk_store<V: $Visitor + ?Sized>(v: &mut V, store: &$($m)? Store) {
            match store {
                Store::Memory => {}
                Store::Redis(url) => v.visit_string(url),
                Store::Cluster(nodes) => {
                    v.visit_span(&$($m)? nodes.span);
                    for url in &$($m)? nodes.value {
                        v.visit_string(url);
                    }
                }
                Store::Sentinel { sentinels, master } => {
                    v.visit_span(&$($m)? sentinels.span);
                    for url in &$($m)? sentinels.value {
                        v.visit_string(url);
                    }
                    if let Some(master) = master {
                        v.visit_string(master);
                    }
                }
                Store::Milvus { url, options } => {
                    v.visit_string(url);
                    for (name, value) in options {
                        v.visit_ident(name);
                        v.visit_string(value);
                    }
                }
            }
        }

        pub fn walk_tools<V: $Visitor + ?Sized>(v: &mut V, tools: &$($m)? Tools) {
            match tools {
                Tools::Keep | Tools::None => {}
                Tools::Only(names) => {
                    for name in names {
                        v.visit_string(name);
                    }
                }
            }
        }

        pub fn walk_hold<V: $Visitor + ?Sized>(v: &mut V, hold: &$($m)? Hold) {
            v.visit_span(&$($m)? hold.span);
            v.visit_string(&$($m)? hold.name);
            v.visit_expr(&$($m)? hold.when);
        }

        pub fn walk_given<V: $Visitor + ?Sized>(v: &mut V, given: &$($m)? Given) {
            v.visit_ident(&$($m)? given.signal);
            v.visit_expr(&$($m)? given.value);
        }

        /// The route, block or budget expected, then the model, if any.
        pub fn walk_expectation<V: $Visitor + ?Sized>(v: &mut V, expect: &$($m)? Expectation) {
            let (target, model) = match expect {
                Expectation::Route { route, model } => (route, model),
                Expectation::Blocked { block, model } => (block, model),
                Expectation::Rejected { budget } => {
                    v.visit_ident(budget);
                    return;
                }
            };
            v.visit_ident(target);
            if let Some(m) = model {
                v.visit_ident(m);
            }
        }

        /// The expression's span, then its sub-expressions and identifiers, left to right as
        /// written.
        pub fn walk_expr<V: $Visitor + ?Sized>(v: &mut V, expr: &$($m)? Expr) {
            v.visit_span(&$($m)? expr.span);
            match &$($m)? expr.kind {
                ExprKind::Bool(_) | ExprKind::Number(_) | ExprKind::Str(_) | ExprKind::Duration(_) => {}
                ExprKind::List(items) => {
                    for item in items {
                        v.visit_expr(item);
                    }
                }
                ExprKind::Name(name) => v.visit_ident(name),
                ExprKind::Field(base, name) => {
                    v.visit_expr(base);
                    v.visit_ident(name);
                }
                ExprKind::Call(function, args) => {
                    v.visit_ident(function);
                    for arg in args {
                        v.visit_expr(arg);
                    }
                }
                ExprKind::Unary(_, inner) | ExprKind::Paren(inner) => v.visit_expr(inner),
                ExprKind::Binary(_, lhs, rhs) => {
                    v.visit_expr(lhs);
                    v.visit_expr(rhs);
                }
                ExprKind::Is(inner, label) => {
                    v.visit_expr(inner);
                    v.visit_ident(label);
                }
                ExprKind::In(inner, labels) => {
                    v.visit_expr(inner);
                    for label in labels {
                        v.visit_ident(label);
                    }
                }
            }
        }
    };
}

pub(crate) use optional_fields;
pub(super) use visitor;

visitor!(Visitor, as_ref);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;
    use crate::span::FileId;

    /// Names every identifier and field key it meets, in visiting order.
    #[derive(Default)]
    struct Names(Vec<String>);

    impl Visitor for Names {
        fn visit_field(&mut self, field: Field<'_>) {
            self.0.push(format!("{}:", field.key));
            walk_field(self, field);
        }
        fn visit_ident(&mut self, ident: &Ident) {
            self.0.push(ident.name.clone());
        }
        fn visit_string(&mut self, string: &Spanned<String>) {
            self.0.push(format!("{:?}", string.value));
        }
    }

    #[test]
    fn walks_every_field_and_expression_in_order() {
        let text = "model m { backend = b serves = \"x\" aliases = [\"y\"] }\n\
            route r priority 1 { when t.cost > 1 and f(g) is hi to m else n, o headers { \"h\" = \"v\" } }\n\
            test t { prompt = \"p\" given s = lo expect blocked k model m }\n";
        let parsed = parse(text, FileId(0));
        assert!(parsed.diagnostics.is_empty(), "{:#?}", parsed.diagnostics);
        let mut names = Names::default();
        names.visit_file(&parsed.file);
        let want = "m backend: b serves: \"x\" aliases: \"y\" \
            r priority: when: t cost f g hi to: m else: n o headers: \"h\" \"v\" \
            t prompt: \"p\" s lo expect: k m";
        assert_eq!(names.0.join(" "), want);
    }
}
