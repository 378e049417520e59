#!/usr/bin/env python3
"""Scores the built-in personal data recognizers and Presidio's pattern recognizers on the
labelled set (tests/data/pii/labelled.jsonl), per type, and times both on it.

Ours: the JSON the `pii_labelled` example prints (its predictions, and the seconds of whole
passes over the set), read from the file given with --ours. Presidio: `presidio-analyzer`'s
predefined pattern recognizers (credit card, email, phone, IBAN, US SSN, IP address), built
directly and called as `recognizer.analyze(text, entities, nlp_artifacts=None)`, their results
merged the way `AnalyzerEngine` does (`EntityRecognizer.remove_duplicates`) and kept at any
score (the engine's default threshold, 0). No spaCy model is loaded: these recognizers only
use the NLP artifacts to raise scores from context words, which no threshold here depends on.
The email recognizer validates top-level domains with `tldextract`, whose public suffix list
is read from the copy the package ships (no download).

Matching is span-exact, as in crates/compiler/tests/pii_quality.rs: a found entity is right
when a labelled one has the same type, start and end (code points); a partial overlap is one
false positive and one false negative. `--overlap` adds columns that count any overlap of the
same type as a match, to tell span conventions from misses.
"""

import argparse
import json
import statistics
import sys
import time

import tldextract
import tldextract.tldextract

# Offline: the suffix list shipped with tldextract, never fetched.
tldextract.tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())

from presidio_analyzer import EntityRecognizer  # noqa: E402
from presidio_analyzer.predefined_recognizers import (  # noqa: E402
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UsSsnRecognizer,
)

TYPES = ["email", "phone", "credit_card", "iban", "us_ssn", "ip_address", "api_key",
         "private_key", "jwt"]
PRESIDIO = {"EMAIL_ADDRESS": "email", "PHONE_NUMBER": "phone", "CREDIT_CARD": "credit_card",
            "IBAN_CODE": "iban", "US_SSN": "us_ssn", "IP_ADDRESS": "ip_address"}


def presidio_recognizers():
    return [CreditCardRecognizer(), EmailRecognizer(), PhoneRecognizer(), IbanRecognizer(),
            UsSsnRecognizer(), IpRecognizer()]


def presidio_find(recognizers, text):
    results = []
    for r in recognizers:
        results.extend(r.analyze(text, r.supported_entities, None) or [])
    return EntityRecognizer.remove_duplicates(results)


def presidio_predictions(records, recognizers):
    out = {}
    for r in records:
        out[r["id"]] = [{"type": PRESIDIO[x.entity_type], "start": x.start, "end": x.end}
                        for x in presidio_find(recognizers, r["text"])]
    return out


def score(records, predictions, overlap=False):
    """Per type: [tp, fp, fn] and the mistakes."""
    counts = {t: [0, 0, 0] for t in TYPES}
    mistakes = []
    for r in records:
        gold = {(e["type"], e["start"], e["end"]) for e in r["entities"]}
        found = {(p["type"], p["start"], p["end"]) for p in predictions.get(r["id"], [])}

        def hit(span, others):
            if span in others:
                return True
            return overlap and any(o[0] == span[0] and o[1] < span[2] and span[1] < o[2]
                                   for o in others)

        for span in found:
            ok = hit(span, gold)
            counts[span[0]][0 if ok else 1] += 1
            if not ok:
                mistakes.append(("wrong", r, span))
        for span in gold:
            if not hit(span, found):
                counts[span[0]][2] += 1
                mistakes.append(("missed", r, span))
    return counts, mistakes


def pct(n, d):
    return 100.0 * n / d if d else 100.0


def cells(c):
    tp, fp, fn = c
    return f"{pct(tp, tp + fp):.1f}", f"{pct(tp, tp + fn):.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", required=True)
    ap.add_argument("--ours", required=True, help="the pii_labelled example's JSON")
    ap.add_argument("--passes", type=int, default=5, help="timed Presidio passes")
    ap.add_argument("--overlap", action="store_true")
    ap.add_argument("--mistakes", action="store_true", help="list Presidio's mistakes")
    args = ap.parse_args()

    with open(args.set, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    with open(args.ours, encoding="utf-8") as f:
        ours = json.load(f)

    recognizers = presidio_recognizers()
    theirs = presidio_predictions(records, recognizers)  # also the warm-up pass
    passes = []
    for _ in range(args.passes):
        start = time.perf_counter()
        for r in records:
            presidio_find(recognizers, r["text"])
        passes.append(time.perf_counter() - start)

    ours_counts, _ = score(records, ours["predictions"])
    theirs_counts, theirs_mistakes = score(records, theirs)
    labelled = {t: sum(e["type"] == t for r in records for e in r["entities"]) for t in TYPES}
    print(f"{len(records)} sentences, {sum(not r['entities'] for r in records)} without "
          "entities; span-exact matching\n")
    print("| type | labelled | ours precision % | ours recall % | Presidio precision % "
          "| Presidio recall % |")
    print("|---|---:|---:|---:|---:|---:|")
    for t in TYPES:
        op, orc = cells(ours_counts[t])
        if t in PRESIDIO.values():
            pp, pr = cells(theirs_counts[t])
        else:
            pp, pr = "—", "—"
        print(f"| `{t}` | {labelled[t]} | {op} | {orc} | {pp} | {pr} |")

    if args.overlap:
        o, _ = score(records, ours["predictions"], overlap=True)
        p, _ = score(records, theirs, overlap=True)
        print("\nAny overlap of the same type counted as a match:\n")
        print("| type | ours precision % | ours recall % | Presidio precision % "
              "| Presidio recall % |")
        print("|---|---:|---:|---:|---:|")
        for t in PRESIDIO.values():
            print(f"| `{t}` | {' | '.join(cells(o[t]))} | {' | '.join(cells(p[t]))} |")

    ours_all = statistics.median(ours["pass_seconds"])
    ours_six = statistics.median(ours["pass_seconds_six"])
    presidio = statistics.median(passes)
    print(f"\nOne pass over the {len(records)} sentences (median): Presidio's six pattern "
          f"recognizers {presidio * 1e3:.2f} ms ({len(passes)} passes); ours, the same six "
          f"types {ours_six * 1e3:.3f} ms, all nine {ours_all * 1e3:.3f} ms "
          f"({len(ours['pass_seconds'])} passes).")
    print(f"Speed ratio (Presidio / ours): {presidio / ours_six:.0f}x on the same six types, "
          f"{presidio / ours_all:.0f}x against all nine.")

    if args.mistakes:
        print("\nPresidio's mistakes:")
        for what, r, (t, s, e) in theirs_mistakes:
            if t in PRESIDIO.values():
                print(f"  {what} {t} {r['id']}: {r['text'][s:e]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
