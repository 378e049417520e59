//! The response cache's look-alike check: whether a stored question whose embedding passed the
//! cache's cosine threshold asks the same thing as the request, on the points sentence encoders
//! are blind to (docs/language.md, "`cache`", "Look-alike questions").
//!
//! Sentence encoders score "convert 5 km to miles" and "convert 5 miles to km", "is it safe…" and
//! "is it unsafe…", "capital of France" and "capital of Germany" as near-identical: the words are
//! the same or play the same part, so the vectors are too. A cache that trusts the cosine alone
//! answers one with the other's answer. This check compares the *facts* of both questions
//! ([`Facts`]) and names the first that differs ([`Mismatch`]):
//!
//! 1. **numbers**: every quantity, as digits or English number words (`5`, `5.0`, `five`), as a
//!    multiset;
//! 2. **units and direction**: every unit, currency, language, data format or time zone, and its
//!    part: the *source* (after a number or `from`, before `to`) or the *target* (after `to`,
//!    `into`, `in`, `as`, `how many`); the same units are required, and a unit that is source in
//!    one question and target in the other is a swapped direction; so is another word after
//!    `than`, `vs`, `from`, `to`, `into` or `over` when both questions hold both words (`is
//!    python faster than java`), and a question that is the other with two words apart
//!    exchanged (`does the dog chase the cat`);
//! 3. **dates**: month and weekday names and relative days (`today`, `tomorrow`, `weekend`);
//! 4. **polarity**: the parity of negations (`not`, `never`, `can't`, `unable`…); opposite
//!    words of a known pair (safe/unsafe, buy/sell, ascending/descending, before/after…) on the
//!    two sides; and a word against itself with a negating prefix (`legal`/`illegal`);
//! 5. **entities**: capitalised words inside a sentence, acronyms, and names from a built-in
//!    list (countries, cities, languages, companies, products): each must occur in the other
//!    question too, so a lower-case `france` still matches `France`;
//! 6. **question**: the question words `who`, `when`, `where` and `why` — a question that asks
//!    *who* wrote Hamlet is not one that asks *when* it was written (`what`, `which` and `how`
//!    are left out: paraphrases trade them freely).
//!
//! The word tables are English (the `english` module); a question that the detector reliably
//! finds to be in another language is compared on the language-neutral facts only (digits,
//! symbols, capitalisation); ASCII text is always read with them. The check is pure and cheap — one pass over each question and a few table
//! look-ups per word — so it runs on every candidate, and it errs towards a miss: a paraphrase it
//! rejects costs one backend call, a look-alike it accepted would have cost a wrong answer.

mod english;
mod facts;
#[cfg(test)]
mod tests;
mod tokens;

pub use facts::Facts;

/// The first fact on which two questions differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mismatch {
    /// A number or quantity is in one question and not the other.
    Number,
    /// A unit, currency, language or format is in one question and not the other.
    Unit,
    /// The same units, converted or translated the other way round.
    Direction,
    /// A date or relative day differs.
    Date,
    /// One question is negated, or uses the opposite word of a pair, where the other is not.
    Polarity,
    /// A name of one question is missing from the other.
    Entity,
    /// The questions ask for different things: who, when, where or why.
    Question,
}

impl Mismatch {
    /// The word logs and metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mismatch::Number => "number",
            Mismatch::Unit => "unit",
            Mismatch::Direction => "direction",
            Mismatch::Date => "date",
            Mismatch::Polarity => "polarity",
            Mismatch::Entity => "entity",
            Mismatch::Question => "question",
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `request` and `stored` ask the same thing as far as the check can tell; the first
/// fact they differ on otherwise. Symmetric, and a question always agrees with itself.
pub fn agree(request: &str, stored: &str) -> Result<(), Mismatch> {
    Facts::of(request).agree(&Facts::of(stored))
}
