//! The request line as bytes: the JSON serde writes for the line's envelope, with every key
//! written as the literal it is. Serde's derived writer escapes each key and goes through its map
//! machinery field by field, which was most of a line's cost; values still go through serde, so
//! strings are escaped and numbers written exactly as before. A test holds the two equal.

use serde::Serialize;

use super::RequestRecord;

/// Appends the line of `record` (without its newline) to `out`.
pub(super) fn write(
    out: &mut Vec<u8>,
    timestamp: &str,
    level: &str,
    target: &str,
    record: &RequestRecord,
) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"timestamp\":");
    value(out, timestamp)?;
    field(out, "level", level)?;
    field(out, "target", target)?;
    out.extend_from_slice(b",\"fields\":{\"request_id\":");
    value(out, &record.request_id)?;
    // In the order of the record's declaration, as serde writes them.
    let r = record;
    field(out, "trace_id", &r.trace_id)?;
    field(out, "endpoint", &r.endpoint)?;
    field(out, "route", &r.route)?;
    field(out, "block", &r.block)?;
    field(out, "model", &r.model)?;
    field(out, "served", &r.served)?;
    field(out, "backend", &r.backend)?;
    field(out, "status", &r.status)?;
    field(out, "path", r.path)?;
    field(out, "stream", &r.stream)?;
    field(out, "fallbacks", &r.fallbacks)?;
    field(out, "latency_ms", &r.latency_ms)?;
    field(out, "routing_us", &r.routing_us)?;
    field(out, "ttft_ms", &r.ttft_ms)?;
    field(out, "prompt_tokens", &r.prompt_tokens)?;
    field(out, "completion_tokens", &r.completion_tokens)?;
    field(out, "cached_tokens", &r.cached_tokens)?;
    field(out, "usage_estimated", &r.usage_estimated)?;
    field(out, "skipped_signals", &r.skipped_signals)?;
    field(out, "policy_generation", &r.policy_generation)?;
    field(out, "error", &r.error)?;
    field(out, "session", &r.session)?;
    field(out, "protection", &r.protection)?;
    field(out, "switch_reason", &r.switch_reason)?;
    field(out, "cache", &r.cache)?;
    field(out, "cache_score", &r.cache_score)?;
    field(out, "previous", &r.previous)?;
    field(out, "budget", &r.budget)?;
    field(out, "redacted", &r.redacted)?;
    out.extend_from_slice(b"}}");
    Ok(())
}

fn value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, value)
}

/// `,"key":value`; `key` is a plain identifier, which JSON needs no escape for.
fn field<T: Serialize + ?Sized>(out: &mut Vec<u8>, key: &str, v: &T) -> serde_json::Result<()> {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    value(out, v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn by_hand(record: &RequestRecord) -> Vec<u8> {
        let mut out = Vec::new();
        write(
            &mut out,
            "2026-12-02T07:00:00.000001Z",
            "INFO",
            "src::request",
            record,
        )
        .unwrap();
        out
    }

    /// The line as the derived serializer writes it.
    fn by_serde(record: &RequestRecord) -> Vec<u8> {
        let envelope = super::super::Envelope {
            timestamp: "2026-12-02T07:00:00.000001Z".into(),
            level: "INFO",
            target: "src::request",
            fields: record,
        };
        serde_json::to_vec(&envelope).unwrap()
    }

    fn full() -> RequestRecord {
        RequestRecord {
            request_id: "req \"quoted\" \u{1}".into(),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
            endpoint: "chat".into(),
            route: Some("code".into()),
            block: Some("secrets".into()),
            model: Some("strong".into()),
            served: Some("llama-70b".into()),
            backend: Some("gpu".into()),
            status: 503,
            path: "upstream",
            stream: true,
            fallbacks: vec!["small: connect".into(), "tiny: timeout".into()],
            latency_ms: 12.345678,
            routing_us: 0.5,
            ttft_ms: Some(f64::NAN),
            prompt_tokens: Some(31),
            completion_tokens: Some(0),
            cached_tokens: Some(u64::MAX),
            usage_estimated: true,
            skipped_signals: vec!["guard".into()],
            policy_generation: 7,
            error: Some("line\nbreak".into()),
            session: Some("pinned"),
            protection: Some("tool-loop".into()),
            switch_reason: Some("owner-lost"),
            cache: Some("miss"),
            cache_score: Some(0.91),
            previous: Some("expanded"),
            budget: Some("per_key; used=1; limit=2".into()),
            redacted: Some("email=2,phone=1".into()),
            watched: None,
        }
    }

    #[test]
    fn the_line_is_what_serde_writes_byte_for_byte() {
        for record in [RequestRecord::default(), full()] {
            let (hand, serde) = (by_hand(&record), by_serde(&record));
            assert_eq!(
                String::from_utf8(hand).unwrap(),
                String::from_utf8(serde).unwrap()
            );
        }
    }

    #[test]
    fn every_member_of_the_record_is_written() {
        let hand: Value = serde_json::from_slice(&by_hand(&full())).unwrap();
        let serde = serde_json::to_value(full()).unwrap();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&hand["fields"]), keys(&serde));
    }
}
