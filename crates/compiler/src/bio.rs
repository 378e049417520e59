//! The labels of a `detector`'s token-classification model: BIO (IOB2) tags, `B-X` on the first
//! word of an entity of type `X`, `I-X` on the words after it, `O` outside any entity. The
//! checker compares a declaration's `entities` with the types a model tags, and the runtime
//! reads a model's answer with the same rule, so both live here.

/// The entity types a BIO label set tags, in label order without repeats: `B-X` and `I-X` give
/// `X`; `O` and labels without a BIO prefix give none.
pub fn entity_types(labels: &[String]) -> Vec<String> {
    let mut types: Vec<String> = Vec::new();
    for label in labels {
        if let Some(t) = bio_type(label) {
            if !types.iter().any(|x| x == t) {
                types.push(t.to_string());
            }
        }
    }
    types
}

/// The entity type of one BIO label (`B-X` or `I-X`), if it is one.
pub fn bio_type(label: &str) -> Option<&str> {
    label
        .strip_prefix("B-")
        .or_else(|| label.strip_prefix("I-"))
        .filter(|t| !t.is_empty())
}

/// Whether a BIO label begins an entity (`B-X`).
pub fn is_begin(label: &str) -> bool {
    label.starts_with("B-") && bio_type(label).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bio_labels_name_their_entity_types_once_in_label_order() {
        let labels: Vec<String> = [
            "O",
            "B-PERSON",
            "I-PERSON",
            "B-LOCATION",
            "I-LOCATION",
            "X-",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(entity_types(&labels), vec!["PERSON", "LOCATION"]);
        assert_eq!(bio_type("B-"), None);
        assert_eq!(bio_type("O"), None);
        assert_eq!(bio_type("I-ORG"), Some("ORG"));
        assert!(is_begin("B-ORG") && !is_begin("I-ORG") && !is_begin("B-"));
    }
}
