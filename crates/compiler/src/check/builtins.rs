//! Calls: the builtin functions of docs/language.md, "Expressions and types" and calls of
//! classifiers and guards (a detector's call is typed in [`super::detectors`]).
//!
//! A name is a builtin function when [`crate::vocabulary`] has a row for it; the typing below
//! matches on that row's [`Function`], so a function can exist here only with its row.
//!
//! Builtins take some arguments that must be literals because they are compiled into the policy:
//! phrase lists (matched by a precompiled automaton), regexes (compiled here, so an invalid one
//! is a check error, E024, and never a run-time surprise) and header names.

use super::names::{Kind, Sym};
use super::types::{texpr, Hint};
use super::Checker;
use crate::hir::{ArithOp, ClassSet, ClassifierId, EncoderId, GuardId, TExpr, TExprKind, Type};
use crate::vocabulary::{self, Builtin, Function};
use src_dsl::ast::{Expr, ExprKind, Ident};
use src_dsl::{codes, Diagnostic, Span};

impl Checker<'_> {
    pub(super) fn call(&mut self, f: &Ident, args: &[Expr], span: Span) -> Option<TExpr> {
        if let Some(b) = vocabulary::lookup_function(&f.name) {
            return self.builtin(b, f, args, span);
        }
        match self.decls.value(&f.name) {
            Some(Sym {
                kind: Kind::Classifier,
                index,
            }) => {
                self.uses.classifiers[index] = true;
                let text = self.model_argument(f, args, span)?;
                let id = ClassifierId(index as u32);
                Some(texpr(
                    TExprKind::Classify(id, Box::new(text)),
                    Type::Class(ClassSet::Classifier(id)),
                    span,
                ))
            }
            Some(Sym {
                kind: Kind::Guard,
                index,
            }) => {
                self.uses.guards[index] = true;
                let text = self.model_argument(f, args, span)?;
                Some(texpr(
                    TExprKind::Guard(GuardId(index as u32), Box::new(text)),
                    Type::Score,
                    span,
                ))
            }
            Some(Sym {
                kind: Kind::Detector,
                index,
            }) => self.detector_call(f, index, args, span),
            found => {
                self.type_args_quietly(args);
                let found = found.or_else(|| self.decls.lookup_any(&f.name));
                match found {
                    Some(_) if self.decls.is_duplicated(&f.name) => {}
                    Some(sym) => {
                        let help = match sym.kind {
                            Kind::Encoder => format!(
                                "an encoder is used through `similarity({}, prompt, [\"...\"])`",
                                f.name
                            ),
                            Kind::Signal => format!("a signal is a value: write `{}`", f.name),
                            _ => "only builtins, classifiers, guards and detectors can be called"
                                .to_string(),
                        };
                        let d = Diagnostic::error(
                            codes::UNKNOWN_FUNCTION,
                            format!("`{}` is {}, not a function", f.name, sym.kind.article()),
                            f.span,
                        )
                        .with_label_message("cannot be called")
                        .with_secondary(self.decls.name_of(sym).span, "declared here")
                        .with_help(help);
                        self.report(d);
                    }
                    None if vocabulary::lookup_value(&f.name).is_some() => {
                        self.report(
                            Diagnostic::error(
                                codes::UNKNOWN_FUNCTION,
                                format!("`{}` is a value, not a function", f.name),
                                f.span,
                            )
                            .with_label_message("cannot be called")
                            .with_help(format!("write `{}` without arguments", f.name)),
                        );
                    }
                    None => {
                        let mut callable: Vec<&str> =
                            vocabulary::functions().map(|b| b.name).collect();
                        callable.extend(self.decls.names_of(Kind::Classifier));
                        callable.extend(self.decls.names_of(Kind::Guard));
                        callable.extend(self.decls.names_of(Kind::Detector));
                        self.unknown(f, "function", &callable);
                    }
                }
                None
            }
        }
    }

    /// Types the arguments of a call that has an error of its own, for their errors and the
    /// uses they record; lists are only meaningful as arguments of the right builtin.
    fn type_args_quietly(&mut self, args: &[Expr]) {
        for a in args {
            if !matches!(a.kind, ExprKind::List(_)) {
                let _ = self.expr(a, Hint::None);
            }
        }
    }

    /// The one text argument of a classifier or guard call.
    fn model_argument(&mut self, f: &Ident, args: &[Expr], span: Span) -> Option<TExpr> {
        if args.len() != 1 {
            self.type_args_quietly(args);
            self.report(
                Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    format!("`{}` takes 1 argument, found {}", f.name, args.len()),
                    span,
                )
                .with_label_message("wrong number of arguments")
                .with_help(format!("write `{}(prompt)`", f.name)),
            );
            return None;
        }
        self.text_argument(f, &args[0])
    }

    fn builtin(&mut self, b: &Builtin, f: &Ident, args: &[Expr], span: Span) -> Option<TExpr> {
        let function = b.function()?;
        let name = b.name;
        if function == Function::Outcomes {
            // `outcomes(pinned)` only has meaning through its fields (see `types::field`).
            let _ = self.protect_only("outcomes", f.span);
            self.report(
                Diagnostic::error(
                    codes::TYPE_MISMATCH,
                    "`outcomes(pinned)` is not a value on its own",
                    span,
                )
                .with_label_message("needs a field")
                .with_help("use `outcomes(pinned).fail_rate` (a score) or `outcomes(pinned).count` (an int)"),
            );
            return None;
        }
        if function == Function::Budget {
            // `budget(NAME)` only has meaning through its fields (see `types::field`).
            if let [Expr {
                kind: ExprKind::Name(name),
                ..
            }] = args
            {
                let _ = self.budget_ref(name);
            }
            self.report(
                Diagnostic::error(
                    codes::TYPE_MISMATCH,
                    "`budget(..)` is not a value on its own",
                    span,
                )
                .with_label_message("needs a field")
                .with_help(
                    "use `budget(NAME).used` (a score) or `budget(NAME).remaining` (a float)",
                ),
            );
            return None;
        }
        if args.len() != b.arity {
            self.type_args_quietly(args);
            let n = b.arity;
            self.report(
                Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    format!(
                        "`{name}` takes {n} argument{}, found {}",
                        if n == 1 { "" } else { "s" },
                        args.len()
                    ),
                    span,
                )
                .with_label_message("wrong number of arguments")
                .with_help(format!("write `{}`", b.usage)),
            );
            return None;
        }
        match function {
            Function::Outcomes | Function::Budget => None,
            Function::Header => {
                let header = self.string_literal(f, &args[0], "a header name")?;
                Some(texpr(
                    TExprKind::Header(header.to_lowercase()),
                    Type::OptText,
                    span,
                ))
            }
            Function::Body => {
                let path = self.string_literal(f, &args[0], "a body path")?;
                if path.split('.').any(str::is_empty) {
                    self.report(
                        Diagnostic::error(
                            codes::WRONG_ARGUMENTS,
                            format!("`{path}` is not a path into the request body"),
                            args[0].span,
                        )
                        .with_label_message("an empty field name")
                        .with_help("name object fields separated by dots, e.g. `body(\"metadata.user_id\")`"),
                    );
                    return None;
                }
                Some(texpr(TExprKind::Body(path), Type::OptText, span))
            }
            Function::Words | Function::Tokens | Function::Language => {
                let text = Box::new(self.text_argument(f, &args[0])?);
                Some(match function {
                    Function::Words => texpr(TExprKind::Words(text), Type::Int, span),
                    Function::Tokens => texpr(TExprKind::Tokens(text), Type::Int, span),
                    _ => texpr(
                        TExprKind::Language(text),
                        Type::Class(ClassSet::Language),
                        span,
                    ),
                })
            }
            Function::Contains | Function::Hits | Function::Density | Function::Sequence => {
                let text = self.text_argument(f, &args[0]);
                let phrases = self.phrases(f, &args[1]);
                let (text, phrases) = (Box::new(text?), phrases?);
                Some(match function {
                    Function::Contains => {
                        texpr(TExprKind::Contains { text, phrases }, Type::Bool, span)
                    }
                    Function::Hits => texpr(TExprKind::Hits { text, phrases }, Type::Int, span),
                    Function::Density => {
                        texpr(TExprKind::Density { text, phrases }, Type::Float, span)
                    }
                    _ => texpr(TExprKind::Sequence { text, phrases }, Type::Bool, span),
                })
            }
            Function::Fuzzy | Function::FuzzyHits | Function::Bm25 => {
                self.approximate(function, f, args, span)
            }
            Function::Pii => self.pii(f, args, span),
            Function::Count | Function::Matches => {
                let text = self.text_argument(f, &args[0]);
                let regex = self.regex(f, &args[1]);
                let (text, regex) = (Box::new(text?), regex?);
                Some(if function == Function::Count {
                    texpr(TExprKind::Count { text, regex }, Type::Int, span)
                } else {
                    texpr(TExprKind::Matches { text, regex }, Type::Bool, span)
                })
            }
            Function::Similarity => {
                let encoder = self.encoder_argument(&args[0]);
                let text = self.text_argument(f, &args[1]);
                let examples = self.phrases(f, &args[2]);
                Some(texpr(
                    TExprKind::Similarity {
                        encoder: encoder?,
                        text: Box::new(text?),
                        examples: examples?,
                    },
                    Type::Score,
                    span,
                ))
            }
            Function::Min | Function::Max => {
                let op = if function == Function::Min {
                    ArithOp::Min
                } else {
                    ArithOp::Max
                };
                self.arithmetic(op, name, &args[0], &args[1], span)
            }
        }
    }

    /// An argument that must be text (`text` or `text?`).
    pub(super) fn text_argument(&mut self, f: &Ident, arg: &Expr) -> Option<TExpr> {
        let t = self.expr(arg, Hint::None)?;
        if t.ty.is_textual() {
            return Some(t);
        }
        let found = self.type_name(t.ty);
        self.report(
            Diagnostic::error(
                codes::WRONG_ARGUMENTS,
                format!("`{}` needs text here, found `{found}`", f.name),
                arg.span,
            )
            .with_label_message(format!("this is `{found}`"))
            .with_help(
                "pass text: `prompt`, `history`, `system`, `header(\"...\")` or a text signal",
            ),
        );
        None
    }

    /// A list of string literals.
    pub(super) fn phrases(&mut self, f: &Ident, arg: &Expr) -> Option<Vec<String>> {
        let items = match &arg.kind {
            ExprKind::List(items) => items,
            _ => {
                let _ = self.expr(arg, Hint::None);
                self.report(
                    Diagnostic::error(
                        codes::WRONG_ARGUMENTS,
                        format!("`{}` needs a list of strings here", f.name),
                        arg.span,
                    )
                    .with_label_message("expected `[\"...\", ...]`")
                    .with_help(format!("write `{}`", usage(&f.name))),
                );
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match &item.kind {
                ExprKind::Str(s) if !s.is_empty() => out.push(s.clone()),
                ExprKind::Str(_) => {
                    self.report(
                        Diagnostic::error(
                            codes::WRONG_ARGUMENTS,
                            format!("an empty phrase in `{}`", f.name),
                            item.span,
                        )
                        .with_label_message("empty")
                        .with_help("an empty phrase would match everywhere: remove it"),
                    );
                    ok = false;
                }
                _ => {
                    let _ = self.expr(item, Hint::None);
                    self.report(
                        Diagnostic::error(
                            codes::WRONG_ARGUMENTS,
                            format!("`{}` phrases must be string literals", f.name),
                            item.span,
                        )
                        .with_label_message("not a string literal")
                        .with_help("phrases are compiled into the policy: write them as `\"...\"`"),
                    );
                    ok = false;
                }
            }
        }
        if items.is_empty() {
            self.report(
                Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    format!("`{}` needs at least one phrase", f.name),
                    arg.span,
                )
                .with_label_message("empty list")
                .with_help(format!("write `{}`", usage(&f.name))),
            );
            ok = false;
        }
        ok.then_some(out)
    }

    fn string_literal(&mut self, f: &Ident, arg: &Expr, what: &str) -> Option<String> {
        if let ExprKind::Str(s) = &arg.kind {
            return Some(s.clone());
        }
        let _ = self.expr(arg, Hint::None);
        self.report(
            Diagnostic::error(
                codes::WRONG_ARGUMENTS,
                format!("`{}` needs {what} as a string literal", f.name),
                arg.span,
            )
            .with_label_message("not a string literal")
            .with_help(format!("write `{}`", usage(&f.name))),
        );
        None
    }

    /// A regex literal, compiled now so that an invalid one is an error of `check` (E024).
    fn regex(&mut self, f: &Ident, arg: &Expr) -> Option<String> {
        let pattern = self.string_literal(f, arg, "a regex")?;
        match regex::Regex::new(&pattern) {
            Ok(_) => Some(pattern),
            Err(e) => {
                self.report(
                    Diagnostic::error(
                        codes::INVALID_REGEX,
                        format!("invalid regex in `{}`", f.name),
                        arg.span,
                    )
                    .with_label_message(regex_error_line(&e))
                    .with_help("regexes use the Rust `regex` syntax; a backslash is written twice in a string: `\"\\\\d+\"`"),
                );
                None
            }
        }
    }

    fn encoder_argument(&mut self, arg: &Expr) -> Option<EncoderId> {
        let ExprKind::Name(id) = &arg.kind else {
            let _ = self.expr(arg, Hint::None);
            self.report(
                Diagnostic::error(
                    codes::WRONG_ARGUMENTS,
                    "the first argument of `similarity` must name an encoder",
                    arg.span,
                )
                .with_label_message("expected an encoder name")
                .with_help("write `similarity(minilm, prompt, [\"example\"])`"),
            );
            return None;
        };
        let index = self.resolve(id, Kind::Encoder)?;
        self.uses.encoders[index] = true;
        Some(EncoderId(index as u32))
    }
}

/// How a builtin is called, for the help of argument errors.
pub(super) fn usage(name: &str) -> &'static str {
    vocabulary::lookup_function(name).map_or("", |b| b.usage)
}

/// The one-line reason of a regex error (the full text repeats the pattern over several lines).
fn regex_error_line(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map(str::to_string)
        .unwrap_or_else(|| {
            text.lines()
                .next()
                .unwrap_or("invalid regex")
                .trim()
                .to_string()
        })
}
