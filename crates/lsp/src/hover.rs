//! Hover: what a name under the cursor is.
//!
//! Declared names get their declaration's essentials (a signal's type and definition, a
//! classifier's labels, a model's binding, a route's priority and target); builtin functions,
//! values and fields get their signature and one line of documentation from the compiler's
//! [`vocabulary`], and a signal's type is the one the checker gave it.

use crate::lexical::word_at;
use crate::symbols::{Decl, SymKind, SymbolKey};
use crate::workspace::Analysis;
use src_compiler::check::DeclKind;
use src_compiler::hir::{ClassSet, Type};
use src_compiler::vocabulary::{self, Receiver};
use src_dsl::ast::{self, BlockAction, ItemKind};
use src_dsl::{FileId, Span};

/// Markdown for the hover at a byte offset, with the span it describes.
pub fn hover(analysis: &Analysis, file: FileId, offset: usize) -> Option<(String, Span)> {
    if let Some(occ) = analysis.symbols.occurrence_at(file, offset) {
        let text = describe(analysis, &occ.key)?;
        return Some((text, occ.span));
    }
    let text = analysis.text(file);
    let (word, range) = word_at(text, offset)?;
    let span = Span::new(file, range.start, range.end);
    let before = &text[..range.start];
    let builtin = if before.ends_with("request.") {
        vocabulary::lookup_field(Receiver::Request, word)
    } else if before.ends_with('.') {
        [
            Receiver::Class,
            Receiver::Model,
            Receiver::Outcomes,
            Receiver::Budget,
        ]
        .into_iter()
        .find_map(|r| vocabulary::lookup_field(r, word))
    } else {
        vocabulary::lookup_function(word).or_else(|| vocabulary::lookup_value(word))
    }?;
    let text = format!("```sr\n{}\n```\n{}", builtin.signature, builtin.doc);
    Some((text, span))
}

/// The markdown description of a declared symbol.
pub fn describe(analysis: &Analysis, key: &SymbolKey) -> Option<String> {
    let symbols = &analysis.symbols;
    if key.kind == SymKind::Label {
        let owner = key.owner.as_deref().unwrap_or("language");
        let labels = symbols
            .classifier_labels
            .get(owner)
            .map(|l| list(l))
            .unwrap_or_default();
        return Some(format!(
            "label `{}` of classifier `{owner}`\n\nlabels: {labels}",
            key.name
        ));
    }
    let decl = symbols.decl(key)?;
    let item = item_of(analysis, decl)?;
    let source = snippet(analysis, item.span);
    let mut out = format!("```sr\n{source}\n```\n");
    match &item.kind {
        ItemKind::Signal(s) => {
            let names = &analysis.names;
            let ty = names.type_of(&s.name.name);
            out = match ty {
                Some(ty) => format!(
                    "signal `{}`: `{}`\n\n{out}",
                    s.name.name,
                    names.type_name(ty)
                ),
                // The checker could not type it: the definition has an error.
                None => format!("signal `{}`\n\n{out}", s.name.name),
            };
            if let Some(Type::Class(set @ ClassSet::Classifier(_))) = ty {
                out.push_str(&format!("\nlabels: {}", list(names.set_labels(set))));
            }
        }
        ItemKind::Classifier(c) => {
            let labels: Vec<String> = c
                .labels
                .iter()
                .flat_map(|l| l.value.iter().map(|i| i.name.clone()))
                .collect();
            out = format!(
                "classifier `{}` → `class<{}>`\n\nlabels: {}\n\n{out}",
                c.name.name,
                c.name.name,
                list(&labels)
            );
        }
        ItemKind::Guard(g) => {
            out = format!("guard `{}` → `score`\n\n{out}", g.name.name);
        }
        ItemKind::Detector(d) => {
            let entities: Vec<String> = d
                .entities
                .iter()
                .flat_map(|l| l.value.iter().map(|e| e.name.clone()))
                .collect();
            out = format!(
                "detector `{}` → `{}(text, [TYPE, ...])`: `bool`\n\nentities: {}\n\n{out}",
                d.name.name,
                d.name.name,
                list(&entities)
            );
        }
        ItemKind::Model(m) => out = format!("{}\n\n{out}", model_summary(analysis, m)),
        ItemKind::Route(r) => out = format!("{}\n\n{out}", route_summary(r)),
        ItemKind::Block(b) => {
            let action = match &b.action {
                BlockAction::Redirect { model } => format!("sends to `{}`", model.name),
                BlockAction::Refuse { status, .. } => format!(
                    "answers {}",
                    status
                        .as_ref()
                        .map(|s| s.value.text.as_str())
                        .unwrap_or("403")
                ),
            };
            out = format!("block `{}`: {action}\n\n{out}", b.name.name);
        }
        _ => out = format!("{} `{}`\n\n{out}", key.kind.word(), key.name),
    }
    Some(out)
}

fn model_summary(analysis: &Analysis, m: &ast::Model) -> String {
    let mut out = format!("model `{}`", m.name.name);
    if let Some(b) = &m.backend {
        out.push_str(&format!("\n\n- backend: `{}`", b.name));
        let key = SymbolKey {
            kind: DeclKind::Backend.into(),
            name: b.name.clone(),
            owner: None,
        };
        let url = analysis
            .symbols
            .decl(&key)
            .and_then(|d| item_of(analysis, d))
            .and_then(|i| match &i.kind {
                ItemKind::Backend(b) => b.url.as_ref().map(|u| u.value.clone()),
                _ => None,
            });
        if let Some(url) = url {
            out.push_str(&format!(" ({url})"));
        }
    }
    if let Some(s) = &m.serves {
        out.push_str(&format!("\n- serves: `{}`", s.value));
    }
    if let Some(c) = &m.cost {
        out.push_str(&format!("\n- cost: {}", c.value.text));
    }
    if let Some(c) = &m.context {
        out.push_str(&format!("\n- context: {}", c.value.text));
    }
    if let Some(a) = &m.aliases {
        let names: Vec<String> = a.value.iter().map(|s| format!("\"{}\"", s.value)).collect();
        out.push_str(&format!("\n- aliases: {}", names.join(", ")));
    }
    out
}

fn route_summary(r: &ast::Route) -> String {
    let priority = match &r.priority {
        Some(p) => format!("priority {}", p.value.text),
        None if r.when.is_none() => "the default route".to_string(),
        None => "no priority".to_string(),
    };
    let mut out = format!("route `{}`: {priority}", r.name.name);
    if let Some(to) = &r.to {
        out.push_str(&format!("\n\n- to `{}`", to.name));
        for f in &r.fallbacks {
            out.push_str(&format!(" else `{}`", f.name));
        }
    }
    out
}

fn list(labels: &[String]) -> String {
    let names: Vec<String> = labels.iter().map(|l| format!("`{l}`")).collect();
    names.join(", ")
}

/// The source text of a span, cut at 20 lines.
fn snippet(analysis: &Analysis, span: Span) -> String {
    let text = analysis.text(span.file);
    let range = span.range();
    let body = text.get(range).unwrap_or("");
    let mut lines: Vec<&str> = body.lines().take(21).collect();
    if lines.len() > 20 {
        lines.truncate(20);
        lines.push("...");
    }
    lines.join("\n")
}

/// The declaration item a symbol's declaration belongs to.
pub fn item_of<'a>(analysis: &'a Analysis, decl: &Decl) -> Option<&'a ast::Item> {
    let tree = analysis.tree(decl.name_span.file)?;
    tree.items.iter().find(|i| i.span == decl.item_span)
}
