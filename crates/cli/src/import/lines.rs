//! Source lines for YAML values. The YAML reader gives values without positions, yet every
//! construct left untranslated is reported with its line; this finds the line of a value from
//! its path of keys and list indices by reading the block structure (indentation) of the text.
//! Flow collections (`{..}`, `[..]`) are not entered: a path into one ends at the line the
//! collection starts on, which is still the line a reader looks at.

/// One step of a path: a mapping key or a list index.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The 1-based line of the value at `path` in `text`, or of its deepest ancestor found (1 when
/// nothing is found).
pub fn line_of(text: &str, path: &[Step<'_>]) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let mut cursor = 0usize;
    let mut parent: isize = -1;
    let mut found = 0usize;
    for step in path {
        let hit = match step {
            Step::Key(key) => find_key(&lines, cursor, parent, key),
            Step::Index(index) => find_item(&lines, cursor, parent, *index),
        };
        let Some((line, column)) = hit else { break };
        found = line;
        cursor = line;
        parent = column as isize;
    }
    found + 1
}

/// The indentation of a line and its content after any `- ` item markers, with the column the
/// content starts at.
fn content(line: &str) -> Option<(usize, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let mut rest = &line[indent..];
    if rest.is_empty() || rest.starts_with('#') {
        return None;
    }
    let mut column = indent;
    while let Some(after) = rest.strip_prefix("- ") {
        let next = after.trim_start_matches(' ');
        column += rest.len() - next.len();
        rest = next;
    }
    Some((indent, column, rest))
}

fn find_key(lines: &[&str], from: usize, parent: isize, key: &str) -> Option<(usize, usize)> {
    for (i, line) in lines.iter().enumerate().skip(from) {
        let Some((indent, column, rest)) = content(line) else {
            continue;
        };
        if i > from && indent as isize <= parent {
            return None;
        }
        if column as isize <= parent {
            continue;
        }
        let bare = rest.strip_prefix(key).and_then(|r| r.strip_prefix(':'));
        let quoted = rest
            .strip_prefix('"')
            .and_then(|r| r.strip_prefix(key))
            .and_then(|r| r.strip_prefix("\":"));
        let single = rest
            .strip_prefix('\'')
            .and_then(|r| r.strip_prefix(key))
            .and_then(|r| r.strip_prefix("':"));
        if bare.or(quoted).or(single).is_some() {
            return Some((i, column));
        }
    }
    None
}

fn find_item(lines: &[&str], from: usize, parent: isize, index: usize) -> Option<(usize, usize)> {
    let mut item_indent = None;
    let mut seen = 0usize;
    for (i, line) in lines.iter().enumerate().skip(from) {
        let Some((indent, _, _)) = content(line) else {
            continue;
        };
        let trimmed = line.trim_start();
        let is_item = trimmed.starts_with("- ") || trimmed == "-";
        // A list may sit at its key's own indentation (`models:` then `- name: ..`).
        if i > from && ((indent as isize) < parent || (indent as isize == parent && !is_item)) {
            return None;
        }
        if !is_item || (indent as isize) < parent {
            continue;
        }
        let at = *item_indent.get_or_insert(indent);
        if indent != at {
            continue;
        }
        if seen == index {
            return Some((i, indent));
        }
        seen += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
model_list:
  - model_name: a
    litellm_params:
      model: openai/a
  # a comment
  - model_name: b
    litellm_params:
      model: openai/b
      rpm: 10
router_settings:
  routing_strategy: least-busy
";

    #[test]
    fn finds_items_of_a_list_at_its_keys_indentation() {
        use Step::*;
        let text = "providers:\n  models:\n  - name: a\n    refs:\n    - key: x\n  - name: b\n    refs:\n    - key: y\n  other: 1\n";
        assert_eq!(
            line_of(text, &[Key("providers"), Key("models"), Index(1)]),
            6
        );
        let path = [
            Key("providers"),
            Key("models"),
            Index(1),
            Key("refs"),
            Index(0),
            Key("key"),
        ];
        assert_eq!(line_of(text, &path), 8);
        assert_eq!(
            line_of(text, &[Key("providers"), Key("models"), Index(2)]),
            2
        );
    }

    #[test]
    fn finds_keys_inside_list_items() {
        use Step::*;
        assert_eq!(line_of(TEXT, &[Key("model_list")]), 1);
        assert_eq!(line_of(TEXT, &[Key("model_list"), Index(0)]), 2);
        assert_eq!(line_of(TEXT, &[Key("model_list"), Index(1)]), 6);
        assert_eq!(
            line_of(
                TEXT,
                &[
                    Key("model_list"),
                    Index(1),
                    Key("litellm_params"),
                    Key("rpm")
                ]
            ),
            9
        );
        assert_eq!(
            line_of(TEXT, &[Key("model_list"), Index(0), Key("model_name")]),
            2
        );
        assert_eq!(
            line_of(TEXT, &[Key("router_settings"), Key("routing_strategy")]),
            11
        );
        // `rpm` is not in the first item: the search stops at its end, at the deepest match.
        assert_eq!(
            line_of(
                TEXT,
                &[
                    Key("model_list"),
                    Index(0),
                    Key("litellm_params"),
                    Key("rpm")
                ]
            ),
            3
        );
    }
}
