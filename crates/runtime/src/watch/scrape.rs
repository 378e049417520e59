//! Reading the server's own Prometheus text exposition back into numbers, so the console's
//! counts and health figures are the very ones `/metrics` reports (and cost the request path
//! nothing beyond the counters it already keeps).

use std::collections::BTreeMap;

/// One sample: its metric name (with `_total`, `_sum`, `_count`, `_bucket` as written), its
/// labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// Every sample of a text exposition; comment lines and lines it cannot read are skipped.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines().filter_map(sample).collect()
}

fn sample(line: &str) -> Option<Sample> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (name, rest) = match line.find('{') {
        Some(open) => (&line[..open], &line[open..]),
        None => line.split_once(' ')?,
    };
    let (labels, rest) = if let Some(inner) = rest.strip_prefix('{') {
        let (labels, end) = labels(inner)?;
        (labels, &inner[end..])
    } else {
        (BTreeMap::new(), rest)
    };
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `key="value",...}`: the labels and the byte offset just past the closing brace.
fn labels(inner: &str) -> Option<(BTreeMap<String, String>, usize)> {
    let mut out = BTreeMap::new();
    let bytes = inner.as_bytes();
    let mut i = 0;
    loop {
        match bytes.get(i)? {
            b'}' => return Some((out, i + 1)),
            b',' | b' ' => i += 1,
            _ => {
                let eq = inner[i..].find("=\"")? + i;
                let key = inner[i..eq].to_owned();
                let mut value = String::new();
                let mut j = eq + 2;
                loop {
                    match *bytes.get(j)? {
                        b'\\' => {
                            match bytes.get(j + 1)? {
                                b'n' => value.push('\n'),
                                other => value.push(char::from(*other)),
                            }
                            j += 2;
                        }
                        b'"' => break,
                        _ => {
                            let c = inner[j..].chars().next()?;
                            value.push(c);
                            j += c.len_utf8();
                        }
                    }
                }
                out.insert(key, value);
                i = j + 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labels_values_and_escapes() {
        let text = "# HELP x y\nsrc_requests_total{route=\"math\",model=\"a\\\"b\",status=\"200\"} 7\nsrc_policy_generation 3\n";
        let got = samples(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].name, "src_requests_total");
        assert_eq!(got[0].label("model"), "a\"b");
        assert_eq!(got[0].label("route"), "math");
        assert_eq!(got[0].value, 7.0);
        assert_eq!(got[1].name, "src_policy_generation");
        assert!(got[1].labels.is_empty());
        assert_eq!(got[1].value, 3.0);
    }
}
