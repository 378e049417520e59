//! The memory store at the size of a real application, end to end through a real `src serve`
//! with the repository's MiniLM encoder: one scope (one system prompt, one key) holds 300
//! distinct questions and still answers the first ones from the cache; another key, sharing
//! none of them, misses every one; and the policy's `max_entries` bounds the store (the oldest
//! questions are evicted and miss again, the newest still hit).

use bytes::Bytes;
use src_testkit::cache::{serve, Served, PROVIDERS};
use src_testkit::TestResult;

const TOPICS: [&str; 30] = [
    "Write a pancake recipe",
    "Plan a camping packing list",
    "Draft a wedding budget",
    "Suggest board games",
    "Design a weekly running plan",
    "Recommend a starter aquarium setup",
    "Outline a birthday party",
    "Propose a vegetable garden layout",
    "Estimate moving boxes needed",
    "Choose a family car",
    "Compose a choir seating chart",
    "Organise a book club reading list",
    "Schedule a conference room rota",
    "Budget a ski holiday",
    "Pick houseplants for an office",
    "Prepare a chili cook-off menu",
    "Sketch a treehouse design",
    "Arrange a carpool timetable",
    "Order pizza toppings",
    "Build a study timetable",
    "Stock a first aid kit",
    "Plan a hiking route",
    "Set up a home network",
    "Write a thank-you note",
    "Create a chore chart",
    "Select wines for dinner",
    "Organise a charity bake sale",
    "Plan a museum visit",
    "Knit a scarf pattern",
    "Train a puppy schedule",
];

/// 300 distinct questions: 30 topics for 2 to 11 people. MiniLM puts one topic's questions near
/// each other, but the look-alike check never lets one number answer for another.
fn questions() -> Vec<String> {
    (2..12)
        .flat_map(|n| TOPICS.iter().map(move |t| format!("{t} for {n} people.")))
        .collect()
}

fn policy(cache: &str) -> String {
    format!(
        "{PROVIDERS}\nroute default {{ to small }}\ncache {{ encoder = minilm  threshold = 0.92  {cache} }}\n"
    )
}

/// Asks every question once, each reaching the backend and stored; their answers in order.
async fn fill(served: &Served, questions: &[String], key: &str) -> TestResult<Vec<Bytes>> {
    let before = served.backend_requests();
    let mut answers = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        let answer = served.ask(q, key).await?;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        assert_ne!(answer.cache(), "hit", "{q}");
        served.stored((before + i + 1) as f64).await?;
        answers.push(answer.body);
    }
    assert_eq!(served.backend_requests(), before + questions.len());
    Ok(answers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_questions_in_one_scope_and_the_first_twenty_still_hit() -> TestResult {
    let served = serve(&policy("")).await?;
    let questions = questions();
    assert_eq!(questions.len(), 300);
    let answers = fill(&served, &questions, "key-a").await?;
    let asked = served.backend_requests();
    let mut hits = 0;
    for (q, stored) in questions.iter().zip(&answers).take(20) {
        let again = served.ask(q, "key-a").await?;
        if again.cache() == "hit" {
            hits += 1;
            // Its own answer, not a neighbour's.
            assert_eq!(&again.body, stored, "{q}");
        }
    }
    assert_eq!(hits, 20, "of the first 20 questions asked again");
    assert_eq!(served.backend_requests(), asked);
    let entries = served.metrics().await?;
    assert!(entries.contains("src_cache_entries 300"), "{entries}");

    // Another key is another tenant: none of key-a's 300 answers reaches it.
    for q in questions.iter().take(20) {
        let other = served.ask(q, "key-b").await?;
        assert_eq!(other.cache(), "miss", "{q}");
    }
    assert_eq!(served.backend_requests(), asked + 20);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_max_entries_evicts_the_least_recently_used() -> TestResult {
    let served = serve(&policy("max_entries = 40")).await?;
    let questions: Vec<String> = questions().into_iter().take(60).collect();
    let answers = fill(&served, &questions, "key-a").await?;
    let entries = served.metrics().await?;
    assert!(entries.contains("src_cache_entries 40"), "{entries}");
    let asked = served.backend_requests();
    // The 40 newest answer from the cache, each with its own answer.
    for (q, stored) in questions.iter().zip(&answers).skip(20) {
        let again = served.ask(q, "key-a").await?;
        assert_eq!(again.cache(), "hit", "{q}");
        assert_eq!(&again.body, stored, "{q}");
    }
    assert_eq!(served.backend_requests(), asked);
    // The 20 oldest were evicted: each reaches the backend again.
    for q in questions.iter().take(20) {
        assert_ne!(served.ask(q, "key-a").await?.cache(), "hit", "{q}");
    }
    assert_eq!(served.backend_requests(), asked + 20);
    Ok(())
}
