//! The look-alike check on the pairs encoders confuse, on paraphrases it must let through, and
//! its laws (a question agrees with itself; agreement is symmetric; changing a number, swapping
//! a conversion or negating a question is always caught).

use proptest::prelude::*;

use super::tokens::{number, tokens};
use super::{agree, Mismatch};

fn rejects(a: &str, b: &str, why: Mismatch) {
    assert_eq!(agree(a, b), Err(why), "{a:?} / {b:?}");
    assert_eq!(agree(b, a), Err(why), "{b:?} / {a:?}");
}

fn accepts(a: &str, b: &str) {
    assert_eq!(agree(a, b), Ok(()), "{a:?} / {b:?}");
    assert_eq!(agree(b, a), Ok(()), "{b:?} / {a:?}");
}

#[test]
fn numbers_are_read_in_one_canonical_spelling() {
    assert_eq!(number("1,000"), "1000");
    assert_eq!(number("01000.50"), "1000.5");
    assert_eq!(number("5,5"), "5.5");
    assert_eq!(number("1.2.0"), "1.2.0");
    assert_eq!(number("0"), "0");
    let t = tokens("Convert 5km to miles, then $12.50!");
    let texts: Vec<&str> = t.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(
        texts,
        ["convert", "5", "km", "to", "miles", "then", "$", "12.5"]
    );
}

#[test]
fn the_issues_examples_are_told_apart() {
    rejects(
        "convert 5 km to miles",
        "convert 5 miles to km",
        Mismatch::Direction,
    );
    rejects(
        "Is it safe to mix bleach and ammonia?",
        "Is it unsafe to mix bleach and ammonia?",
        Mismatch::Polarity,
    );
}

#[test]
fn numbers_and_quantities() {
    rejects("what is 15% of 80", "what is 15% of 90", Mismatch::Number);
    rejects(
        "how do I cook rice for 4 people",
        "how do I cook rice for 6 people",
        Mismatch::Number,
    );
    rejects(
        "population of the world in 1900",
        "population of the world in 2000",
        Mismatch::Number,
    );
    rejects(
        "what is 2 million divided by 4",
        "what is 2 thousand divided by 4",
        Mismatch::Number,
    );
    accepts("what is five plus three", "what's 5 + 3");
    accepts("what is 1,000 times 3", "what is 1000 times 3?");
    accepts("who won the 2nd world war", "who won the second world war");
    accepts("which one is better", "which is better");
}

#[test]
fn units_and_direction() {
    rejects(
        "translate good morning from English to French",
        "translate good morning from French to English",
        Mismatch::Direction,
    );
    rejects(
        "how many cups are in a gallon",
        "how many gallons are in a cup",
        Mismatch::Direction,
    );
    rejects(
        "convert this python code to java",
        "convert this java code to python",
        Mismatch::Direction,
    );
    rejects(
        "convert 100 usd to euros",
        "convert 100 usd to yen",
        Mismatch::Unit,
    );
    rejects(
        "what is 30 °C in fahrenheit",
        "what is 30 °F in celsius",
        Mismatch::Direction,
    );
    accepts("convert 5 km to miles", "how many miles is 5 km");
    accepts("convert 5 km to miles", "5 kilometers in miles?");
    accepts(
        "translate 'thank you' into Spanish",
        "how do you say thank you in spanish",
    );
}

#[test]
fn swapped_operands() {
    rejects(
        "is python faster than java",
        "is java faster than python",
        Mismatch::Direction,
    );
    rejects(
        "cheapest flights from paris to london",
        "cheapest flights from london to paris",
        Mismatch::Direction,
    );
    accepts(
        "how do I get from london to paris",
        "how do I get to paris from london",
    );
    rejects(
        "does the dog chase the cat",
        "does the cat chase the dog",
        Mismatch::Direction,
    );
    rejects(
        "why do cats hate dogs",
        "why do dogs hate cats",
        Mismatch::Direction,
    );
}

#[test]
fn dates() {
    rejects(
        "weather in Oslo today",
        "weather in Oslo tomorrow",
        Mismatch::Date,
    );
    rejects(
        "is the store open on sunday",
        "is the store open on monday",
        Mismatch::Date,
    );
    accepts(
        "what happened on july 4 1776",
        "what happened on 4 July 1776",
    );
}

#[test]
fn negation_and_opposites() {
    rejects(
        "can I eat raw eggs",
        "can't I eat raw eggs",
        Mismatch::Polarity,
    );
    rejects(
        "should I buy Tesla stock",
        "should I sell Tesla stock",
        Mismatch::Polarity,
    );
    rejects(
        "sort the list in ascending order",
        "sort the list in descending order",
        Mismatch::Polarity,
    );
    rejects(
        "is it legal to carry a knife",
        "is it illegal to carry a knife",
        Mismatch::Polarity,
    );
    rejects(
        "coffee with milk calories",
        "coffee without milk calories",
        Mismatch::Polarity,
    );
    rejects(
        "take this before eating",
        "take this after eating",
        Mismatch::Polarity,
    );
    accepts("why can't I sleep", "why am I unable to sleep");
    accepts(
        "is it safe to swim after eating",
        "is swimming after eating safe",
    );
}

#[test]
fn entities() {
    rejects(
        "What is the capital of France?",
        "What is the capital of Germany?",
        Mismatch::Entity,
    );
    rejects(
        "what is the capital of france",
        "what is the capital of germany",
        Mismatch::Entity,
    );
    rejects(
        "who founded Acme Robotics",
        "who founded Zenith Robotics",
        Mismatch::Entity,
    );
    rejects(
        "how far is the moon",
        "how far is the sun",
        Mismatch::Entity,
    );
    accepts(
        "what is the capital of france",
        "What's France's capital city?",
    );
    accepts("What is the GDP of Germany?", "What is Germany's GDP?");
    accepts("Tell me about New York", "tell me about new york");
    accepts(
        "What Is The Best Way To Learn Guitar",
        "what is the best way to learn guitar",
    );
}

#[test]
fn question_words() {
    rejects(
        "Who wrote Hamlet?",
        "When was Hamlet written?",
        Mismatch::Question,
    );
    accepts("Why do earthquakes happen?", "What causes earthquakes?");
    accepts(
        "Where is the Eiffel Tower?",
        "Where is the Eiffel Tower located?",
    );
}

#[test]
fn paraphrases_agree() {
    accepts("how do I reset my password", "how can I reset my password?");
    accepts(
        "what's a good recipe for pancakes",
        "give me a good pancake recipe",
    );
    accepts(
        "explain how photosynthesis works",
        "how does photosynthesis work?",
    );
    accepts("tips for better sleep", "how can I sleep better");
}

#[test]
fn another_language_is_read_on_its_digits_and_names() {
    rejects(
        "¿Cuál es la población de España en 2020?",
        "¿Cuál es la población de España en 2010?",
        Mismatch::Number,
    );
    accepts("東京の人口は?", "東京の人口は?");
}

/// Words a generated question is made of.
fn word() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "how", "what", "is", "the", "best", "way", "to", "cook", "rice", "learn", "guitar",
        "weather", "capital", "of", "my", "password", "reset", "good", "recipe", "for", "Paris",
        "London", "price", "convert", "km", "miles", "safe", "buy", "today", "not", "5", "12",
        "three", "French", "in", "than", "faster", "python", "java",
    ])
    .prop_map(str::to_owned)
}

fn question() -> impl Strategy<Value = String> {
    prop::collection::vec(word(), 1..12).prop_map(|w| w.join(" "))
}

proptest! {
    #[test]
    fn a_question_agrees_with_itself(q in question()) {
        prop_assert_eq!(agree(&q, &q), Ok(()));
    }

    #[test]
    fn agreement_is_symmetric(a in question(), b in question()) {
        prop_assert_eq!(agree(&a, &b).is_ok(), agree(&b, &a).is_ok());
    }

    #[test]
    fn another_number_never_agrees(q in question(), n in 0u32..10_000, m in 0u32..10_000) {
        prop_assume!(n != m);
        prop_assert_eq!(
            agree(&format!("{q} {n}"), &format!("{q} {m}")),
            Err(Mismatch::Number)
        );
    }

    #[test]
    fn a_swapped_conversion_never_agrees(n in 1u32..1_000, units in prop::sample::subsequence(
        vec!["km", "miles", "kg", "pounds", "liters", "gallons", "celsius", "fahrenheit"], 2)) {
        let (a, b) = (units[0], units[1]);
        prop_assert_eq!(
            agree(&format!("convert {n} {a} to {b}"), &format!("convert {n} {b} to {a}")),
            Err(Mismatch::Direction)
        );
    }

    #[test]
    fn a_negated_question_never_agrees(q in question()) {
        prop_assert_eq!(
            agree(&format!("is it {q}"), &format!("is it not {q}")),
            Err(Mismatch::Polarity)
        );
    }
}
