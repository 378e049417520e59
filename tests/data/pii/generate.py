#!/usr/bin/env python3
"""Builds `labelled.jsonl`, the labelled set the personal data recognizers are measured on.

Two sources, both written in one markup: `[[type|value]]` marks an entity of `type` whose
text is `value`; everything else is plain text that holds no entity.

- `hand.txt` (beside this file): hand-written sentences, mostly the hard cases — entities at
  the edges of punctuation and non-Latin scripts, and look-alikes that are not entities (order
  numbers, version strings, timestamps, Luhn-failing card numbers, never-issued SSNs, IBANs
  failing mod-97, hex hashes, public keys...).
- Generated sentences: templates filled with values this script makes (valid card numbers of
  each issuer, IBANs of a dozen countries with their mod-97 check digits, issuable SSNs, valid
  phone numbers of several plans, keys of each issuer's shape, signed-looking JWTs, PEM blocks),
  and generated negatives made the same way with the check broken. The seed is fixed,
  so the output only changes when this script or `hand.txt` does.

Each output line is `{"id", "text", "entities": [{"type", "start", "end", "value"}]}` with
`start`/`end` in Unicode code points (Python string indices) and `value == text[start:end]`.

Labelling rules, where a recognizer could argue: a span is the entity as written, without
surrounding brackets, quotes or sentence punctuation, and with the zero-width spaces a writer
slipped between its digits; nine bare digits after `SSN:` are an SSN; a number that a reader
takes for something else by its context (a version string's tail, digits inside an IBAN) is not
an entity; an address RFC 5321 refuses (a doubled dot) is not an email address; a PEM block is
the whole block, `BEGIN` to `END` line (to its last base64 line when the paste lost the `END`).

Run: `python3 tests/data/pii/generate.py` (standard library only). Where the `phonenumbers`
package is importable (the Presidio venv of scripts/bench/pii_presidio.sh has it) every phone
number labelled is also checked to be valid by libphonenumber's metadata.
"""

import base64
import json
import os
import random
import re
import string
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = ["email", "phone", "credit_card", "iban", "us_ssn", "ip_address", "api_key",
         "private_key", "jwt"]
MARK = re.compile(r"\[\[([a-z_]+)\|(.*?)\]\]", re.S)

rng = random.Random(20261207)


def parse(marked, ident):
    """Turns marked text into a labelled record."""
    text, entities, pos = "", [], 0
    for m in MARK.finditer(marked):
        kind, value = m.group(1), m.group(2)
        if kind not in TYPES:
            sys.exit(f"{ident}: unknown type {kind}")
        text += marked[pos:m.start()]
        entities.append({"type": kind, "start": len(text), "end": len(text) + len(value),
                         "value": value})
        text += value
        pos = m.end()
    text += marked[pos:]
    if "[[" in text:
        sys.exit(f"{ident}: unclosed mark")
    return {"id": ident, "text": text, "entities": entities}


# ---- values -------------------------------------------------------------------------------

def luhn_digit(body):
    """The check digit that makes `body + digit` pass Luhn."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


ISSUERS = [  # (prefix choices, length, grouping)
    (["4"], 16, [4, 4, 4, 4]),  # Visa
    (["51", "52", "53", "54", "55", "2221", "2500", "2720"], 16, [4, 4, 4, 4]),  # Mastercard
    (["34", "37"], 15, [4, 6, 5]),  # American Express
    (["6011", "65", "644"], 16, [4, 4, 4, 4]),  # Discover
    (["3528", "3530", "3589"], 16, [4, 4, 4, 4]),  # JCB
    (["36", "38"], 14, [4, 6, 4]),  # Diners Club
    (["62"], 16, [4, 4, 4, 4]),  # UnionPay
    (["4"], 13, [4, 4, 5]),  # old Visa
]


def digits(n):
    return "".join(rng.choice(string.digits) for _ in range(n))


def card(valid=True):
    prefixes, length, groups = rng.choice(ISSUERS)
    prefix = rng.choice(prefixes)
    body = prefix + digits(length - len(prefix) - 1)
    check = luhn_digit(body)
    if not valid:
        check = str((int(check) + rng.randint(1, 9)) % 10)
    number = body + check
    sep = rng.choice(["", " ", "-", " "])
    out, i = [], 0
    for g in groups:
        out.append(number[i:i + g])
        i += g
    return sep.join(out) if sep else number


IBAN = {  # country: builder of the BBAN (the part after the check digits)
    "DE": lambda: digits(18),
    "GB": lambda: rng.choice(["NWBK", "BARC", "MIDL", "LOYD"]) + digits(14),
    "FR": lambda: digits(10) + "".join(rng.choice(string.ascii_uppercase + string.digits)
                                       for _ in range(11)) + digits(2),
    "ES": lambda: digits(20),
    "NL": lambda: rng.choice(["ABNA", "INGB", "RABO"]) + digits(10),
    "IT": lambda: rng.choice(string.ascii_uppercase) + digits(10) + digits(12),
    "CH": lambda: digits(17),
    "BE": lambda: digits(12),
    "AT": lambda: digits(16),
    "PL": lambda: digits(24),
    "SE": lambda: digits(20),
    "NO": lambda: digits(11),
    "IE": lambda: rng.choice(["AIBK", "BOFI"]) + digits(14),
}


def mod97(s):
    n = "".join(str(int(c, 36)) for c in s)
    return int(n) % 97


def iban(valid=True, grouped=None):
    country = rng.choice(sorted(IBAN))
    bban = IBAN[country]()
    check = 98 - mod97(bban + country + "00")
    if not valid:
        check = (check + rng.randint(1, 90)) % 97 + 2
        if 98 - mod97(bban + country + "00") == check:
            check = check % 97 + 1
    number = f"{country}{check:02d}{bban}"
    if grouped is None:
        grouped = rng.random() < 0.6
    if grouped:
        number = " ".join(number[i:i + 4] for i in range(0, len(number), 4))
    return number


def ssn(valid=True):
    while True:
        area, group, serial = rng.randint(1, 899), rng.randint(1, 99), rng.randint(1, 9999)
        if area != 666:
            break
    if not valid:
        which = rng.choice(["area0", "area666", "area9", "group", "serial"])
        if which == "area0":
            area = 0
        elif which == "area666":
            area = 666
        elif which == "area9":
            area = rng.randint(900, 999)
        elif which == "group":
            group = 0
        else:
            serial = 0
    sep = rng.choice(["-", "-", " "])
    return f"{area:03d}{sep}{group:02d}{sep}{serial:04d}"


US_AREAS = ["212", "213", "305", "312", "404", "415", "503", "617", "646", "702", "713",
            "206", "303", "602", "919"]


def phone():
    kind = rng.choice(["us_paren", "us_dash", "us_dot", "us_e164", "us_e164_dash", "gb_nat",
                       "gb_e164", "gb_mobile", "de", "fr", "jp", "in", "au", "br", "es"])
    area, exch, line = rng.choice(US_AREAS), str(rng.randint(201, 989)), digits(4)
    if exch[1:] == "11":
        exch = "234"
    return {
        "us_paren": f"({area}) {exch}-{line}",
        "us_dash": f"{area}-{exch}-{line}",
        "us_dot": f"{area}.{exch}.{line}",
        "us_e164": f"+1{area}{exch}{line}",
        "us_e164_dash": f"+1-{area}-{exch}-{line}",
        "gb_nat": f"020 7946 0{digits(3)}",
        "gb_e164": f"+44 20 7946 0{digits(3)}",
        "gb_mobile": rng.choice([f"+44 7911 {digits(6)}", f"07911 {digits(6)}"]),
        "de": f"+49 30 {rng.randint(2, 9)}{digits(7)}",
        "fr": f"+33 1 {digits(2)} {digits(2)} {digits(2)} {digits(2)}",
        "jp": f"+81 3-{rng.randint(3, 6)}{digits(3)}-{digits(4)}",
        "in": f"+91 9{digits(4)} {digits(5)}",
        "au": f"+61 2 9{digits(3)} {digits(4)}",
        "br": f"+55 11 9{digits(4)}-{digits(4)}",
        "es": f"+34 91{digits(1)} {digits(3)} {digits(3)}",
    }[kind]


FIRST = ["jane", "john", "maria", "li", "ahmed", "olga", "pierre", "sven", "ana", "kenji"]
LAST = ["doe", "smith", "garcia", "wei", "khan", "ivanova", "martin", "berg", "silva", "sato"]
DOMAINS = ["example.com", "example.org", "mail.example.co.uk", "corp-example.io",
           "sub.example.net", "example.de", "uni.example.edu", "example.travel"]


def email():
    f, l = rng.choice(FIRST), rng.choice(LAST)
    local = rng.choice([f"{f}.{l}", f"{f}{rng.randint(1, 99)}", f"{f}_{l}", f"{f}+{l}",
                        f"{f[0]}{l}", f"{f}.{l}-{rng.randint(1, 9)}", f"{f.upper()}.{l}"])
    return f"{local}@{rng.choice(DOMAINS)}"


def ipv4():
    return ".".join(str(rng.randint(1, 254)) for _ in range(4))


def ipv6():
    groups = [f"{rng.randint(0, 0xffff):x}" for _ in range(8)]
    form = rng.choice(["full", "compressed", "doc", "mapped", "loop"])
    if form == "full":
        return ":".join(groups)
    if form == "compressed":
        return ":".join(groups[:3]) + "::" + ":".join(groups[6:])
    if form == "doc":
        return f"2001:db8:{groups[0]}::{rng.randint(1, 255)}"
    if form == "mapped":
        return f"::ffff:{ipv4()}"
    return "fe80::1"


ALNUM = string.ascii_letters + string.digits


def rand(alphabet, n):
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s):
            return s


def api_key():
    kind = rng.choice(["aws", "ghp", "ghpat", "openai", "openai_proj", "slack", "google",
                       "stripe"])
    return {
        "aws": lambda: "AKIA" + rand(string.ascii_uppercase + string.digits, 16),
        "ghp": lambda: rng.choice(["ghp_", "gho_", "ghs_"]) + rand(ALNUM, 36),
        "ghpat": lambda: "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
        "openai": lambda: "sk-" + rand(ALNUM, 48),
        "openai_proj": lambda: "sk-proj-" + rand(ALNUM + "_-", 56),
        "slack": lambda: f"xoxb-{digits(11)}-{digits(12)}-{rand(ALNUM, 24)}",
        "google": lambda: "AIza" + rand(ALNUM + "_-", 35),
        "stripe": lambda: rng.choice(["sk_live_", "rk_live_"]) + rand(ALNUM, 24),
    }[kind]()


def b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def jwt():
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {"sub": digits(6), "name": rng.choice(FIRST).title(), "iat": 1700000000
               + rng.randint(0, 9999999)}
    sig = b64url(bytes(rng.randrange(256) for _ in range(32)))
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(payload).encode()),
                     sig])


def pem(kind=None):
    label = kind or rng.choice(["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY",
                                "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"])
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(rng.randint(96, 200))))
    body = body.decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


# ---- generated sentences ------------------------------------------------------------------

POSITIVE = {
    "email": [
        "Please reply to {} before Friday.",
        "Contact: {}",
        "Send the invoice to <{}> and copy finance.",
        "Mon adresse est {}, merci.",
        "メールは{}までお願いします。",
        "Écrivez à « {} » pour l'accès.",
        "CC: {}; {}",
    ],
    "phone": [
        "Call me at {} tomorrow.",
        "Tel. {}",
        "Our support line ({}) is open 9-5.",
        "Bitte rufen Sie {} an.",
        "电话：{}",
        "Numbers: {}, {}.",
        "Reach the on-call engineer on {} if the pager fails.",
    ],
    "credit_card": [
        "My card number is {} exp 09/29.",
        "Charge {} for the renewal.",
        "Card: {}",
        "Kreditkarte {} bitte belasten.",
        "カード番号：{}",
        "Use {} or {} for the order.",
    ],
    "iban": [
        "Wire the payment to {} by Monday.",
        "IBAN: {}",
        "Überweisung an {} (Verwendungszweck 4471).",
        "Account {}, BIC NWBKGB2L.",
        "收款账户：{}",
    ],
    "us_ssn": [
        "My SSN is {}.",
        "SSN: {}",
        "Social security number {} on the form.",
        "The applicant ({}) was approved.",
    ],
    "ip_address": [
        "The server at {} refuses connections.",
        "Allow {} in the firewall.",
        "Requests from {} and {} spiked at noon.",
        "ping {}",
        "服务器地址：{}",
    ],
    "api_key": [
        "export API_KEY={}",
        "Here's my key: {} — why does it fail?",
        "token = \"{}\"",
        "The build logs printed {} in clear text.",
    ],
    "private_key": [
        "Here is the key:\n{}\nWhy does ssh reject it?",
        "key.pem contains\n{}",
        "```\n{}\n```",
    ],
    "jwt": [
        "Authorization: Bearer {}",
        "The cookie session={} expired.",
        "Decode this token: {}",
    ],
}

MAKERS = {"email": email, "phone": phone, "credit_card": card, "iban": iban, "us_ssn": ssn,
          "ip_address": lambda: rng.choice([ipv4, ipv4, ipv6])(), "api_key": api_key,
          "private_key": pem, "jwt": jwt}

# Look-alikes made by breaking what makes a value an entity.
NEGATIVE = [
    ("Order {} shipped.", lambda: card(valid=False)),
    ("Reference number {}", lambda: card(valid=False)),
    ("Transfer to {} failed validation.", lambda: iban(valid=False)),
    ("IBAN {} was rejected.", lambda: iban(valid=False)),
    ("Test record {} (never issued).", lambda: ssn(valid=False)),
    ("Form field: {}", lambda: ssn(valid=False)),
    ("Version {} is out.", lambda: ".".join(str(rng.randint(0, 40)) for _ in range(
        rng.choice([3, 5])))),
    ("Build {} passed.", lambda: f"v{rng.randint(1, 20)}.{rng.randint(0, 9)}."
                                 f"{rng.randint(0, 9)}.{rng.randint(0, 99)}"),
    ("Commit {} fixed it.", lambda: "".join(rng.choice("0123456789abcdef") for _ in range(40))),
    ("sha256: {}", lambda: "".join(rng.choice("0123456789abcdef") for _ in range(64))),
    ("Logged at {}.", lambda: f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                              f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                              f"{rng.randint(0, 59):02d}Z"),
    ("Invoice {} is due.", lambda: f"INV-{digits(4)}-{digits(6)}"),
    ("Tracking: {}", lambda: f"1Z{rand(string.ascii_uppercase + string.digits, 16)}"),
    ("Order #{} confirmed.", lambda: "1" + digits(rng.choice([7, 8, 11, 12]))),
    ("Total: ${} due.", lambda: f"{rng.randint(1, 999)},{digits(3)},{digits(3)}.{digits(2)}"),
    ("Device {} joined.", lambda: ":".join(f"{rng.randint(0, 255):02X}" for _ in range(6))),
    ("Request id {}", lambda: "-".join(["".join(rng.choice("0123456789abcdef") for _ in range(n))
                                        for n in (8, 4, 4, 4, 12)])),
]


def generated():
    records = []
    for kind in TYPES:
        for n in range(30):
            template = POSITIVE[kind][n % len(POSITIVE[kind])]
            marked = template.format(*(f"[[{kind}|{MAKERS[kind]()}]]"
                                       for _ in range(template.count("{}"))))
            records.append(parse(marked, f"gen-{kind}-{n:02d}"))
    for n in range(170):
        template, make = NEGATIVE[n % len(NEGATIVE)]
        records.append(parse(template.format(make()), f"gen-neg-{n:03d}"))
    # Mixed sentences: several types at once.
    for n in range(30):
        kinds = rng.sample(["email", "phone", "credit_card", "iban", "us_ssn", "ip_address",
                            "api_key", "jwt"], 3)
        parts = [f"{k.replace('_', ' ')} [[{k}|{MAKERS[k]()}]]" for k in kinds]
        records.append(parse("Customer record: " + ", ".join(parts) + ".", f"gen-mix-{n:02d}"))
    return records


def hand():
    records = []
    with open(os.path.join(HERE, "hand.txt"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            # `\n` in a hand-written line is a newline (PEM blocks).
            records.append(parse(line.replace("\\n", "\n").replace("\\u200b", "\u200b"),
                                 f"hand-{n:03d}"))
    return records


def check_phones(records):
    try:
        import phonenumbers
    except ImportError:
        return
    for r in records:
        for e in r["entities"]:
            if e["type"] != "phone":
                continue
            v = e["value"]
            if v.startswith("00"):
                v = "+" + v[2:]
            regions = [None] if v.startswith("+") else ["US", "GB", "DE", "FR"]
            if not any(phonenumbers.is_valid_number(phonenumbers.parse(v, reg))
                       for reg in regions):
                sys.exit(f"{r['id']}: {v} is not a valid phone number")


def main():
    records = hand() + generated()
    check_phones(records)
    for r in records:
        for e in r["entities"]:
            assert r["text"][e["start"]:e["end"]] == e["value"]
    out = os.path.join(HERE, "labelled.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = {t: sum(e["type"] == t for r in records for e in r["entities"]) for t in TYPES}
    negatives = sum(not r["entities"] for r in records)
    print(f"{len(records)} sentences, {negatives} without entities: {counts}")


if __name__ == "__main__":
    main()
