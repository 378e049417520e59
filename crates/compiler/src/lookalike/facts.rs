//! The facts of one question that the look-alike check compares, read in one pass over its
//! tokens, and the comparison of two questions' facts.

use super::english as en;
use super::tokens::{self, Kind, Token};
use super::Mismatch;

/// A unit's part in a conversion or translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Converted or translated from: after a number or `from`, before `to`.
    Source,
    /// Converted or translated to: after `to`, `into`, `in`, `as`, `how many`.
    Target,
    /// Neither could be told.
    Free,
}

/// What the look-alike check compares of one question.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Canonical numbers, sorted (a multiset).
    numbers: Vec<String>,
    /// Canonical units with their parts, sorted and deduplicated.
    units: Vec<(&'static str, Role)>,
    /// Canonical dates, sorted and deduplicated.
    dates: Vec<&'static str>,
    /// Negations counted; only their parity matters.
    negations: usize,
    /// `(pair, side)` of the opposite words used, sorted and deduplicated.
    sides: Vec<(u16, u8)>,
    /// The first word after each operand marker (`than`, `from`, `to`…): `(marker, word)`.
    operands: Vec<(String, String)>,
    /// Every folded word and number, in order.
    words: Vec<String>,
    /// Names, each as its folded words.
    names: Vec<Vec<String>>,
    /// The question words `who`, `when`, `where`, `why` used, sorted and deduplicated.
    asks: Vec<&'static str>,
}

/// The question words that say what is asked for.
const QUESTION_WORDS: &[&str] = &["who", "when", "where", "why"];

/// Words after which the next word is the operand whose swap changes the question.
const OPERAND_MARKERS: &[&str] = &["than", "vs", "versus", "from", "to", "into", "over"];

/// Words skipped when looking for a unit's or an operand's neighbour.
const ARTICLES: &[&str] = &[
    "a", "an", "the", "one", "this", "that", "my", "your", "some",
];

impl Facts {
    /// The facts of `text`; English word tables apply unless the text is reliably detected as
    /// another language.
    pub fn of(text: &str) -> Facts {
        // ASCII text is read with the English tables without asking the detector (the tables
        // only match English words, and the detector costs more than the rest of the check).
        let english = text.is_ascii()
            || whatlang::detect(text)
                .is_none_or(|info| info.lang() == whatlang::Lang::Eng || !info.is_reliable());
        Facts::read(&tokens::tokens(text), english)
    }

    fn read(toks: &[Token], english: bool) -> Facts {
        let mut facts = Facts {
            words: toks.iter().map(|t| t.text.clone()).collect(),
            ..Facts::default()
        };
        let numeric = numbers(toks, english, &mut facts.numbers);
        facts.numbers.sort();
        facts.units = units(toks, english, &numeric);
        if english {
            for (i, t) in toks
                .iter()
                .enumerate()
                .filter(|(_, t)| t.kind == Kind::Word)
            {
                let w = t.text.as_str();
                // `am` is a verb unless a time comes before it (`9 am`).
                let clock = matches!(w, "am" | "pm");
                if clock && !(i > 0 && toks[i - 1].kind == Kind::Number) {
                    continue;
                }
                if en::NEGATORS.contains(&w) || w.ends_with("n't") {
                    facts.negations += 1;
                }
                if let Some(sides) = en::SIDES.get(w) {
                    facts.sides.extend(sides);
                }
                if let Some(&date) = en::DATE_MAP.get(w) {
                    facts.dates.push(date);
                }
                if let Some(&ask) = QUESTION_WORDS.iter().find(|&&q| q == w) {
                    facts.asks.push(ask);
                }
            }
            facts.operands = operands(toks);
        }
        facts.sides.sort_unstable();
        facts.sides.dedup();
        facts.dates.sort_unstable();
        facts.dates.dedup();
        facts.asks.sort_unstable();
        facts.asks.dedup();
        facts.names = names(toks, english);
        facts
    }

    /// Compares two questions' facts; the first that differs.
    pub fn agree(&self, other: &Facts) -> Result<(), Mismatch> {
        if self.numbers != other.numbers {
            return Err(Mismatch::Number);
        }
        units_agree(&self.units, &other.units)?;
        if swapped(self, other) || transposed(&self.words, &other.words) {
            return Err(Mismatch::Direction);
        }
        if self.dates != other.dates {
            return Err(Mismatch::Date);
        }
        if self.negations % 2 != other.negations % 2
            || opposed(&self.sides, &other.sides)
            || prefixed(&self.words, &other.words)
            || prefixed(&other.words, &self.words)
        {
            return Err(Mismatch::Polarity);
        }
        if !self.names.iter().all(|n| contains(&other.words, n))
            || !other.names.iter().all(|n| contains(&self.words, n))
        {
            return Err(Mismatch::Entity);
        }
        if !self.asks.is_empty() && !other.asks.is_empty() && self.asks != other.asks {
            return Err(Mismatch::Question);
        }
        Ok(())
    }
}

/// Reads the numbers of `toks` into `out`; returns which tokens are (part of) a number.
fn numbers(toks: &[Token], english: bool, out: &mut Vec<String>) -> Vec<bool> {
    let mut numeric = vec![false; toks.len()];
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.kind == Kind::Number {
            numeric[i] = true;
            let mut value = t.text.clone();
            if english {
                if let Some(next) = toks.get(i + 1) {
                    if let Some(&scale) = en::SCALE_MAP.get(next.text.as_str()) {
                        value = scaled(&value, scale);
                        numeric[i + 1] = true;
                        i += 1;
                    } else if en::ORDINAL_SUFFIXES.contains(&next.text.as_str()) {
                        numeric[i + 1] = true;
                        i += 1;
                    }
                }
            }
            out.push(value);
            i += 1;
            continue;
        }
        if english && t.kind == Kind::Word && number_word(toks, i) {
            // A run of number words (`two hundred and five`, `twenty-five`) is one number.
            let (mut total, mut current) = (0u64, 0u64);
            let mut j = i;
            while j < toks.len() {
                let w = toks[j].text.as_str();
                if let Some(&n) = en::NUMBER_MAP.get(w) {
                    current = current.saturating_add(n);
                } else if let Some(&scale) = en::SCALE_MAP.get(w) {
                    current = current.max(1).saturating_mul(scale);
                    if scale >= 1_000 {
                        total = total.saturating_add(current);
                        current = 0;
                    }
                } else if w == "and"
                    && toks
                        .get(j + 1)
                        .is_some_and(|n| n.kind == Kind::Word && number_word(toks, j + 1))
                {
                    // `hundred and five`
                } else {
                    break;
                }
                numeric[j] = true;
                j += 1;
            }
            out.push(total.saturating_add(current).to_string());
            i = j;
            continue;
        }
        i += 1;
    }
    numeric
}

/// Whether word `i` is a number word; `one` after `which`, `this`… is a pronoun.
fn number_word(toks: &[Token], i: usize) -> bool {
    let w = toks[i].text.as_str();
    if w == "one" {
        let before = i.checked_sub(1).map(|p| toks[p].text.as_str());
        let pronoun = [
            "which", "this", "that", "the", "any", "each", "every", "no", "another", "someone",
            "anyone", "everyone", "no-one",
        ];
        return !before.is_some_and(|b| pronoun.contains(&b));
    }
    if w == "second" {
        // `a second` is a moment; `second largest` is an ordinal.
        let before = i.checked_sub(1).map(|p| toks[p].text.as_str());
        return before != Some("a");
    }
    en::NUMBER_MAP.contains_key(w) || en::SCALE_MAP.contains_key(w)
}

fn scaled(value: &str, scale: u64) -> String {
    match value.parse::<f64>() {
        Ok(v) => {
            let product = v * scale as f64;
            if product.fract() == 0.0 && product.abs() < 1e15 {
                format!("{}", product as i64)
            } else {
                tokens::number(&format!("{product}"))
            }
        }
        Err(_) => value.to_owned(),
    }
}

/// The index of the nearest word before `i`, skipping articles.
fn before(toks: &[Token], i: usize) -> Option<usize> {
    (0..i)
        .rev()
        .find(|&p| !ARTICLES.contains(&toks[p].text.as_str()))
}

/// The units of `toks` with their parts.
fn units(toks: &[Token], english: bool, numeric: &[bool]) -> Vec<(&'static str, Role)> {
    let mut found: Vec<(&'static str, Role, bool)> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if numeric[i] || !(english || t.kind == Kind::Symbol) {
            continue;
        }
        let Some(&(unit, bound)) = en::UNIT_MAP.get(t.text.as_str()) else {
            continue;
        };
        // `100 °F`: the degree sign joins the number to its unit.
        let prev = i.checked_sub(1);
        let prev = match prev {
            Some(p) if toks[p].text == "°" => p.checked_sub(1),
            other => other,
        };
        let after_number = prev.is_some_and(|p| numeric[p]);
        let degree = i > 0 && toks[i - 1].text == "°";
        if bound && !after_number && !degree {
            continue;
        }
        let marker = prev
            .and_then(|_| before(toks, if degree { i - 1 } else { i }))
            .map(|p| toks[p].text.as_str());
        let next = toks.get(i + 1).map(|n| n.text.as_str());
        let (role, strong) = if after_number
            || (t.kind == Kind::Symbol && toks.get(i + 1).is_some_and(|n| n.kind == Kind::Number))
        {
            (Role::Source, false)
        } else if let Some(m) = marker.filter(|m| en::TARGET_MARKERS.contains(m)) {
            (Role::Target, matches!(m, "many" | "much"))
        } else if marker.is_some_and(|m| en::SOURCE_MARKERS.contains(&m))
            || next.is_some_and(|n| en::SOURCE_BEFORE.contains(&n))
        {
            (Role::Source, false)
        } else {
            (Role::Free, false)
        };
        found.push((unit, role, strong));
    }
    // `how many cups in a gallon`: after `how many`, the unit after `in` is what is divided.
    if found.iter().any(|&(_, _, strong)| strong) {
        for f in found.iter_mut().filter(|f| f.1 == Role::Target && !f.2) {
            f.1 = Role::Source;
        }
    }
    // `convert this python code to java`: with one part told, a unit of no part is the other.
    let has = |r: Role| found.iter().any(|f| f.1 == r);
    let fill = match (has(Role::Source), has(Role::Target)) {
        (false, true) => Some(Role::Source),
        (true, false) => Some(Role::Target),
        _ => None,
    };
    let mut units: Vec<(&'static str, Role)> = found
        .into_iter()
        .map(|(u, r, _)| match (r, fill) {
            (Role::Free, Some(f)) => (u, f),
            _ => (u, r),
        })
        .collect();
    // A unit named twice in one part (`km … kilometers`) is one fact.
    units.sort_unstable();
    units.dedup();
    units
}

/// The same units, and no unit in one part of one question and only the other of the other.
fn units_agree(a: &[(&'static str, Role)], b: &[(&'static str, Role)]) -> Result<(), Mismatch> {
    let names = |u: &[(&'static str, Role)]| -> Vec<&'static str> {
        let mut n: Vec<&'static str> = u.iter().map(|x| x.0).collect();
        n.dedup();
        n
    };
    if names(a) != names(b) {
        return Err(Mismatch::Unit);
    }
    let parts = |u: &[(&'static str, Role)], name: &str| -> Vec<Role> {
        u.iter()
            .filter(|x| x.0 == name && x.1 != Role::Free)
            .map(|x| x.1)
            .collect()
    };
    for name in names(a) {
        let (pa, pb) = (parts(a, name), parts(b, name));
        if !pa.is_empty() && !pb.is_empty() && !pa.iter().any(|r| pb.contains(r)) {
            return Err(Mismatch::Direction);
        }
    }
    Ok(())
}

/// The first word after each operand marker, skipping articles.
fn operands(toks: &[Token]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if !OPERAND_MARKERS.contains(&t.text.as_str()) {
            continue;
        }
        if let Some(next) = toks[i + 1..]
            .iter()
            .find(|n| !ARTICLES.contains(&n.text.as_str()))
        {
            out.push((t.text.clone(), next.text.clone()));
        }
    }
    out
}

/// Whether the same marker takes a different operand in each question, each operand being a
/// word of the other question too: `is python faster than java` / `… java faster than python`.
fn swapped(a: &Facts, b: &Facts) -> bool {
    a.operands.iter().any(|(marker, x)| {
        b.operands.iter().any(|(m, y)| {
            m == marker
                && x != y
                && b.words.contains(x)
                && a.words.contains(y)
                // Both questions name the other's operand after the same marker nowhere.
                && !b.operands.iter().any(|(m2, y2)| m2 == marker && y2 == x)
                && !a.operands.iter().any(|(m2, x2)| m2 == marker && x2 == y)
        })
    })
}

/// Whether one question is the other with two words that are not neighbours swapped (`does the
/// dog chase the cat` / `does the cat chase the dog`): the same words in the same places but
/// two, whose roles are exchanged.
fn transposed(a: &[String], b: &[String]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let differ: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    // Adjacent words exchanged (`july 4` / `4 july`) keep their roles.
    matches!(differ.as_slice(), &[i, j] if j > i + 1 && a[i] == b[j] && a[j] == b[i])
}

/// Whether a pair of opposite words is used on one side only in each question, and not the
/// same side.
fn opposed(a: &[(u16, u8)], b: &[(u16, u8)]) -> bool {
    let sides = |s: &[(u16, u8)], pair: u16| -> Vec<u8> {
        s.iter().filter(|x| x.0 == pair).map(|x| x.1).collect()
    };
    a.iter().any(|&(pair, _)| {
        let (sa, sb) = (sides(a, pair), sides(b, pair));
        !sb.is_empty() && sa != sb
    })
}

/// Whether `a` uses a word that `b` uses only with a negating prefix (`legal` / `illegal`).
fn prefixed(a: &[String], b: &[String]) -> bool {
    b.iter().any(|negated| {
        en::NEGATING_PREFIXES.iter().any(|p| {
            negated.strip_prefix(p).is_some_and(|w| {
                w.chars().count() >= 4
                    && a.iter().any(|x| x == w)
                    && !b.iter().any(|x| x == w)
                    && !a.iter().any(|x| x == negated)
            })
        })
    })
}

/// The names of `toks`: capitalised words inside a sentence (and a capitalised first word that
/// starts a run of them: `New York is …`), acronyms, camel case, and the built-in names (English
/// tables).
fn names(toks: &[Token], english: bool) -> Vec<Vec<String>> {
    let namelike = |i: usize| -> bool {
        let t = &toks[i];
        t.kind == Kind::Word
            && t.text.chars().count() > 1
            && !en::NEVER_NAME_SET.contains(t.text.as_str())
            && !en::DATE_MAP.contains_key(t.text.as_str())
            && (t.acronym || t.inner_capital || (t.capital && !t.initial))
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        // A capitalised first word belongs to the name that follows it (`New York is …`).
        let starts = namelike(i)
            || (toks[i].capital
                && toks[i].initial
                && !en::NEVER_NAME_SET.contains(toks[i].text.as_str())
                && i + 1 < toks.len()
                && namelike(i + 1)
                && !toks[i + 1].initial);
        if starts {
            // Each word of a capitalised run is a name of its own, so `Germany's GDP` matches
            // `the GDP of Germany`; the built-in list below keeps multi-word names whole.
            let mut j = i + 1;
            while j < toks.len() && namelike(j) && !toks[j].initial {
                j += 1;
            }
            out.extend(toks[i..j].iter().map(|t| vec![t.text.clone()]));
            i = j;
        } else {
            i += 1;
        }
    }
    if english {
        let words: Vec<&str> = toks.iter().map(|t| t.text.as_str()).collect();
        let mut i = 0;
        while i < words.len() {
            let longest = en::NAME_STARTS
                .contains(words[i])
                .then(|| {
                    (1..=en::LONGEST_NAME.min(words.len() - i))
                        .rev()
                        .find(|&n| en::NAMES.contains(&words[i..i + n].to_vec()))
                })
                .flatten();
            match longest {
                Some(n) => {
                    out.push(words[i..i + n].iter().map(|w| (*w).to_owned()).collect());
                    i += n;
                }
                None => i += 1,
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `phrase` occurs in `words` as consecutive words.
fn contains(words: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && words.windows(phrase.len()).any(|w| w == phrase)
}
