//! Reading vLLM Semantic Router's recipe language (`recipe.dsl`) into a small tree with source
//! lines: `MODEL`, `ENTRYPOINT`, `RECIPE`, `SIGNAL`, `PROJECTION`, `PLUGIN`, `ROUTE` (with
//! `PRIORITY`, `WHEN` boolean trees over `type("name")` references, `MODEL` lists and the
//! statements the translation reports), `TEST`, and the blocks it only reports
//! (`ROUTING`, `DECISION_TREE`). Values are the language's JSON-like fields.

use crate::import::ImportError;

/// A field value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Str(String),
    Num(f64),
    Bool(bool),
    Ident(String),
    List(Vec<Val>),
    Obj(Vec<(String, Val)>),
}

impl Val {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) | Val::Ident(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_num(&self) -> Option<f64> {
        match self {
            Val::Num(n) => Some(*n),
            Val::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn as_list(&self) -> &[Val] {
        match self {
            Val::List(items) => items,
            _ => &[],
        }
    }

    pub fn strings(&self) -> Vec<String> {
        self.as_list()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    pub fn get(&self, key: &str) -> Option<&Val> {
        match self {
            Val::Obj(fields) => get(fields, key),
            _ => None,
        }
    }
}

/// The field `key` of `fields`.
pub fn get<'a>(fields: &'a [(String, Val)], key: &str) -> Option<&'a Val> {
    fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A route's `PLUGIN name { fields }`, with its line.
pub type PluginRef = (String, Vec<(String, Val)>, usize);

/// A boolean tree of signal references.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>),
    Ref {
        kind: String,
        name: String,
        line: usize,
    },
}

#[derive(Debug, Clone)]
pub struct Decl {
    pub line: usize,
    pub fields: Vec<(String, Val)>,
}

#[derive(Debug, Clone)]
pub struct Signal {
    pub kind: String,
    pub name: String,
    pub decl: Decl,
}

#[derive(Debug, Clone)]
pub struct ModelRef {
    pub name: String,
    pub options: Vec<(String, Val)>,
}

#[derive(Debug, Clone, Default)]
pub struct Route {
    pub name: String,
    pub line: usize,
    pub description: Option<String>,
    pub priority: Option<i64>,
    pub when: Option<Expr>,
    pub models: Vec<ModelRef>,
    /// `PLUGIN name { fields }` references.
    pub plugins: Vec<PluginRef>,
    /// Statements with no counterpart: (what, line).
    pub other: Vec<(String, usize)>,
}

/// A `PROJECTION KIND NAME { fields }`: a weighted `score` over signals, or the `mapping` of a
/// score onto threshold bands.
#[derive(Debug, Clone)]
pub struct Projection {
    pub kind: String,
    pub name: String,
    pub decl: Decl,
}

/// A whole `recipe.dsl`. Declarations inside a `RECIPE` block are read as the recipe's own.
#[derive(Debug, Default)]
pub struct Recipe {
    pub models: Vec<(String, Decl)>,
    pub entrypoints: Vec<Decl>,
    pub signals: Vec<Signal>,
    pub projections: Vec<Projection>,
    pub routes: Vec<Route>,
    /// `TEST name { "query" -> route }` entries: (query, route, line).
    pub tests: Vec<(String, String, usize)>,
    /// Declarations reported as a whole: (what, line).
    pub other: Vec<(String, usize)>,
    /// `RECIPE` blocks after the first, which are not translated: (name, line).
    pub extra_recipes: Vec<(String, usize)>,
    /// The first `RECIPE`'s name, when the declarations sit in one.
    pub name: Option<String>,
    /// Constructs reported with their own reason: (what, line, why).
    pub notes: Vec<(String, usize, String)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Punct(char),
    Arrow,
}

struct Lexer;

impl Lexer {
    fn run(file: &str, text: &str) -> Result<Vec<(Tok, usize)>, ImportError> {
        let chars: Vec<char> = text.chars().collect();
        let mut out = Vec::new();
        let (mut i, mut line) = (0usize, 1usize);
        while i < chars.len() {
            let c = chars[i];
            if c == '\n' {
                line += 1;
                i += 1;
            } else if c.is_whitespace() {
                i += 1;
            } else if c == '#' || (c == '/' && chars.get(i + 1) == Some(&'/')) {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '"' {
                let start = line;
                let mut s = String::new();
                i += 1;
                loop {
                    let Some(&c) = chars.get(i) else {
                        return Err(error(file, start, "a string is not closed"));
                    };
                    i += 1;
                    match c {
                        '"' => break,
                        '\\' => {
                            let e = chars.get(i).copied().unwrap_or('\\');
                            i += 1;
                            match e {
                                'n' => s.push('\n'),
                                't' => s.push('\t'),
                                'r' => s.push('\r'),
                                'u' => {
                                    let hex: String = chars.iter().skip(i).take(4).collect();
                                    i += 4;
                                    let code = u32::from_str_radix(&hex, 16).ok();
                                    s.push(code.and_then(char::from_u32).unwrap_or('\u{FFFD}'));
                                }
                                other => s.push(other),
                            }
                        }
                        '\n' => {
                            line += 1;
                            s.push('\n');
                        }
                        c => s.push(c),
                    }
                }
                out.push((Tok::Str(s), start));
            } else if c == '-' && chars.get(i + 1) == Some(&'>') {
                out.push((Tok::Arrow, line));
                i += 2;
            } else if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                let start = i;
                i += 1;
                while i < chars.len()
                    && (chars[i].is_ascii_digit() || matches!(chars[i], '.' | 'e' | 'E'))
                {
                    i += 1;
                }
                let raw: String = chars[start..i].iter().collect();
                let n = raw
                    .parse()
                    .map_err(|_| error(file, line, &format!("`{raw}` is not a number")))?;
                out.push((Tok::Num(n), line));
            } else if c.is_alphabetic() || c == '_' {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '-' | '/' | '.'))
                {
                    i += 1;
                }
                out.push((Tok::Ident(chars[start..i].iter().collect()), line));
            } else if "{}[]():,=".contains(c) {
                out.push((Tok::Punct(c), line));
                i += 1;
            } else {
                return Err(error(file, line, &format!("unexpected `{c}`")));
            }
        }
        Ok(out)
    }
}

fn error(file: &str, line: usize, message: &str) -> ImportError {
    ImportError::Shape {
        path: file.to_string(),
        line,
        message: message.to_string(),
    }
}

struct Parser<'a> {
    file: &'a str,
    toks: Vec<(Tok, usize)>,
    at: usize,
    /// The `RECIPE` to read (the first when none is named); the others are only listed.
    select: Option<&'a str>,
}

/// Parses a whole `recipe.dsl`, reading the declarations of the `RECIPE` named `select` (the
/// first one when `None`) with those outside every `RECIPE`.
pub fn parse(file: &str, text: &str, select: Option<&str>) -> Result<Recipe, ImportError> {
    let toks = Lexer::run(file, text)?;
    let mut p = Parser {
        file,
        toks,
        at: 0,
        select,
    };
    let mut recipe = Recipe::default();
    let mut seen_recipe = false;
    while p.peek().is_some() {
        p.top(&mut recipe, &mut seen_recipe)?;
    }
    if let Some(wanted) = select {
        if recipe.name.as_deref() != Some(wanted) {
            let names: Vec<String> = recipe
                .extra_recipes
                .iter()
                .map(|(n, _)| format!("`{n}`"))
                .collect();
            return Err(error(
                file,
                0,
                &format!(
                    "no RECIPE `{wanted}` (the file has {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        }
    }
    Ok(recipe)
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.at)
            .or_else(|| self.toks.last())
            .map_or(1, |(_, l)| *l)
    }

    fn next(&mut self) -> Result<Tok, ImportError> {
        let tok = self
            .toks
            .get(self.at)
            .map(|(t, _)| t.clone())
            .ok_or_else(|| error(self.file, self.line(), "the recipe ends too early"))?;
        self.at += 1;
        Ok(tok)
    }

    fn fail<T>(&self, message: &str) -> Result<T, ImportError> {
        Err(error(self.file, self.line(), message))
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(i)) if i == w)
    }

    fn expect(&mut self, c: char) -> Result<(), ImportError> {
        if self.is_punct(c) {
            self.at += 1;
            Ok(())
        } else {
            self.fail(&format!("expected `{c}`"))
        }
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.is_punct(c);
        if hit {
            self.at += 1;
        }
        hit
    }

    /// An identifier or a string.
    fn name(&mut self) -> Result<String, ImportError> {
        match self.next()? {
            Tok::Ident(s) | Tok::Str(s) => Ok(s),
            _ => {
                self.at -= 1;
                self.fail("expected a name")
            }
        }
    }

    fn top(&mut self, r: &mut Recipe, seen_recipe: &mut bool) -> Result<(), ImportError> {
        let line = self.line();
        let word = match self.next()? {
            Tok::Ident(w) => w,
            _ => {
                self.at -= 1;
                return self.fail("expected a declaration (`SIGNAL`, `ROUTE`, `MODEL`, ...)");
            }
        };
        match word.as_str() {
            "MODEL" => {
                let name = self.name()?;
                let fields = self.block()?;
                r.models.push((name, Decl { line, fields }));
            }
            "ENTRYPOINT" => {
                let fields = self.block()?;
                r.entrypoints.push(Decl { line, fields });
            }
            "RECIPE" => {
                let name = self.name()?;
                self.opts()?;
                let take = match self.select {
                    Some(wanted) => wanted == name,
                    None => !*seen_recipe,
                };
                if !take || *seen_recipe {
                    r.extra_recipes.push((name, line));
                    self.skip_block()?;
                } else {
                    *seen_recipe = true;
                    r.name = Some(name);
                    self.expect('{')?;
                    while !self.eat('}') {
                        self.top(r, seen_recipe)?;
                    }
                }
            }
            "SIGNAL" => {
                let kind = self.name()?;
                let name = self.name()?;
                let fields = self.block()?;
                r.signals.push(Signal {
                    kind,
                    name,
                    decl: Decl { line, fields },
                });
            }
            "PROJECTION" => {
                let kind = self.name()?;
                let name = self.name()?;
                let fields = self.block()?;
                r.projections.push(Projection {
                    kind,
                    name,
                    decl: Decl { line, fields },
                });
            }
            "PLUGIN" => {
                let name = self.name()?;
                let kind = self.name()?;
                self.skip_block()?;
                r.other.push((format!("PLUGIN {name} {kind}"), line));
            }
            "ROUTE" => {
                let route = self.route(line)?;
                r.routes.push(route);
            }
            "TEST" => {
                let _ = self.name()?;
                self.expect('{')?;
                while !self.eat('}') {
                    let at = self.line();
                    let query = match self.next()? {
                        Tok::Str(s) => s,
                        _ => return self.fail("expected a query string"),
                    };
                    if self.next()? != Tok::Arrow {
                        return self.fail("expected `->`");
                    }
                    let route = self.name()?;
                    r.tests.push((query, route, at));
                }
            }
            "ROUTING" => {
                // Routes are tried by priority: that strategy needs nothing more.
                let fields = self.block()?;
                match get(&fields, "strategy").and_then(Val::as_str) {
                    Some("priority") | None => {}
                    Some(other) => r.other.push((format!("ROUTING strategy {other}"), line)),
                }
            }
            "DECISION_TREE" => {
                let what = format!("DECISION_TREE {}", self.name()?);
                self.skip_block()?;
                r.other.push((what, line));
            }
            other => {
                self.at -= 1;
                return self.fail(&format!("`{other}` is not a declaration of a recipe"));
            }
        }
        Ok(())
    }

    /// `{ key: value ... }`.
    fn block(&mut self) -> Result<Vec<(String, Val)>, ImportError> {
        self.expect('{')?;
        let mut fields = Vec::new();
        loop {
            self.eat(',');
            if self.eat('}') {
                return Ok(fields);
            }
            let key = self.name()?;
            self.expect(':')?;
            fields.push((key, self.value()?));
        }
    }

    /// A balanced `{ .. }`, read past.
    fn skip_block(&mut self) -> Result<(), ImportError> {
        self.expect('{')?;
        let mut depth = 1;
        while depth > 0 {
            match self.next()? {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }

    /// `( key = value, .. )`, when present.
    fn opts(&mut self) -> Result<Vec<(String, Val)>, ImportError> {
        let mut opts = Vec::new();
        if !self.eat('(') {
            return Ok(opts);
        }
        while !self.eat(')') {
            let key = self.name()?;
            self.expect('=')?;
            opts.push((key, self.value()?));
            self.eat(',');
        }
        Ok(opts)
    }

    fn value(&mut self) -> Result<Val, ImportError> {
        match self.next()? {
            Tok::Str(s) => Ok(Val::Str(s)),
            Tok::Num(n) => Ok(Val::Num(n)),
            Tok::Ident(w) if w == "true" => Ok(Val::Bool(true)),
            Tok::Ident(w) if w == "false" => Ok(Val::Bool(false)),
            Tok::Ident(w) => Ok(Val::Ident(w)),
            Tok::Punct('[') => {
                let mut items = Vec::new();
                while !self.eat(']') {
                    items.push(self.value()?);
                    self.eat(',');
                }
                Ok(Val::List(items))
            }
            Tok::Punct('{') => {
                self.at -= 1;
                Ok(Val::Obj(self.block()?))
            }
            _ => {
                self.at -= 1;
                self.fail("expected a value")
            }
        }
    }

    fn route(&mut self, line: usize) -> Result<Route, ImportError> {
        let mut route = Route {
            name: self.name()?,
            line,
            ..Route::default()
        };
        let opts = self.opts()?;
        route.description = get(&opts, "description").and_then(|v| v.as_str().map(str::to_string));
        self.expect('{')?;
        while !self.eat('}') {
            let at = self.line();
            let word = match self.next()? {
                Tok::Ident(w) => w,
                _ => return self.fail("expected a route statement"),
            };
            match word.as_str() {
                "PRIORITY" => {
                    let at = self.line();
                    match self.next()? {
                        Tok::Num(n) => route.priority = Some(n as i64),
                        _ => return Err(error(self.file, at, "expected a number after PRIORITY")),
                    }
                }
                "TIER" => {
                    self.next()?;
                    route.other.push(("TIER".to_string(), at));
                }
                "WHEN" => route.when = Some(self.or()?),
                "MODEL" => loop {
                    let name = self.name()?;
                    let mut options = Vec::new();
                    if self.eat('(') {
                        while !self.eat(')') {
                            let key = self.name()?;
                            self.expect('=')?;
                            options.push((key, self.value()?));
                            self.eat(',');
                        }
                    }
                    route.models.push(ModelRef { name, options });
                    if !self.eat(',') {
                        break;
                    }
                    if !matches!(self.peek(), Some(Tok::Str(_))) && !self.next_is_model_name() {
                        break;
                    }
                },
                "ALGORITHM" => {
                    let kind = self.name()?;
                    if self.is_punct('{') {
                        self.skip_block()?;
                    }
                    if kind != "static" {
                        route.other.push((format!("ALGORITHM {kind}"), at));
                    }
                }
                "PLUGIN" => {
                    let name = self.name()?;
                    let fields = if self.is_punct('{') {
                        self.block()?
                    } else {
                        Vec::new()
                    };
                    route.plugins.push((name, fields, at));
                }
                "DESCRIPTION" => route.description = Some(self.name()?),
                "ACTION" => {
                    let kind = self.name()?;
                    let dest = self.name()?;
                    route.other.push((format!("ACTION {kind} {dest}"), at));
                }
                "EMIT" => {
                    let kind = self.name()?;
                    self.skip_block()?;
                    route.other.push((format!("EMIT {kind}"), at));
                }
                "FOR" => {
                    while !self.is_punct('{') {
                        self.next()?;
                    }
                    self.skip_block()?;
                    route
                        .other
                        .push(("FOR (candidate iteration)".to_string(), at));
                }
                other => return self.fail(&format!("`{other}` is not a route statement")),
            }
        }
        Ok(route)
    }

    /// Whether the token after a `,` in a `MODEL` list is another model rather than the next
    /// statement (statements are upper-case keywords).
    fn next_is_model_name(&self) -> bool {
        matches!(self.peek(), Some(Tok::Ident(w)) if !w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    }

    fn or(&mut self) -> Result<Expr, ImportError> {
        let mut terms = vec![self.and()?];
        while self.is_word("OR") {
            self.at += 1;
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::Or(terms)
        })
    }

    fn and(&mut self) -> Result<Expr, ImportError> {
        let mut factors = vec![self.factor()?];
        while self.is_word("AND") {
            self.at += 1;
            factors.push(self.factor()?);
        }
        Ok(if factors.len() == 1 {
            factors.remove(0)
        } else {
            Expr::And(factors)
        })
    }

    fn factor(&mut self) -> Result<Expr, ImportError> {
        if self.is_word("NOT") {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.factor()?)));
        }
        if self.eat('(') {
            let e = self.or()?;
            self.expect(')')?;
            return Ok(e);
        }
        let line = self.line();
        let kind = self.name()?;
        self.expect('(')?;
        let name = self.name()?;
        // Optional fields inside the reference are not read.
        while !self.eat(')') {
            self.next()?;
        }
        Ok(Expr::Ref { kind, name, line })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_declarations_and_boolean_trees() {
        let text = r#"
MODEL "m/a" { capabilities: ["x"] }
RECIPE default (description = "d") {
  SIGNAL keyword k { operator: "OR", keywords: ["a", "b"] }
  SIGNAL context long { min_tokens: "8K" }
  ROUTE r (description = "x") {
    PRIORITY 10
    WHEN keyword("k") AND NOT (context("long") OR domain("math"))
    MODEL "m/a", "m/b"(reasoning = true)
    PLUGIN tools { mode: "none" }
  }
  TEST t { "hello" -> r }
}
"#;
        let r = parse("recipe.dsl", text, None).expect("parses");
        assert_eq!(r.models.len(), 1);
        assert_eq!(r.signals.len(), 2);
        assert_eq!(r.signals[1].decl.line, 5);
        let route = &r.routes[0];
        assert_eq!(route.priority, Some(10));
        assert_eq!(route.models.len(), 2);
        assert_eq!(route.models[1].name, "m/b");
        assert!(matches!(&route.when, Some(Expr::And(f)) if f.len() == 2));
        assert_eq!(r.tests, vec![("hello".to_string(), "r".to_string(), 12)]);
        let err = parse("recipe.dsl", "ROUTE r { PRIORITY x }", None).expect_err("refused");
        assert!(err.to_string().starts_with("recipe.dsl:1:"), "{err}");
    }
}
