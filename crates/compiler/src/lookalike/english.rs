//! The English word tables of the look-alike check: negations, number words, units and what
//! marks a conversion's direction, dates, pairs of opposite words, the words that are never
//! names however they are written, and the built-in names (`entities.txt`).
//!
//! The tables are data, read once into hash maps on first use; adding a word is a one-line
//! change here, and the unit tests in `tests.rs` pin the behaviour a change could break.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// Words that negate what follows (any word ending in `n't` does too).
pub const NEGATORS: &[&str] = &[
    "not", "no", "never", "cannot", "none", "nothing", "nobody", "nowhere", "neither", "nor",
    "unable", "without", "cant", "dont", "doesnt", "isnt", "wont", "shouldnt",
];

/// Number words and their values (digits are read by the tokenizer).
pub const NUMBERS: &[(&str, u64)] = &[
    ("zero", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("thirty", 30),
    ("forty", 40),
    ("fifty", 50),
    ("sixty", 60),
    ("seventy", 70),
    ("eighty", 80),
    ("ninety", 90),
    ("dozen", 12),
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
    ("twice", 2),
    ("double", 2),
    ("triple", 3),
    ("single", 1),
];

/// Number words that multiply what precedes them (`5 million`, `two hundred`).
pub const SCALES: &[(&str, u64)] = &[
    ("hundred", 100),
    ("thousand", 1_000),
    ("million", 1_000_000),
    ("billion", 1_000_000_000),
    ("trillion", 1_000_000_000_000),
];

/// Suffixes of ordinals written with digits (`1st`, `22nd`): read as the number alone.
pub const ORDINAL_SUFFIXES: &[&str] = &["st", "nd", "rd", "th"];

/// Units, currencies, languages, formats and time zones: (alias, canonical name, whether the
/// alias counts only right after a number or `°`, because alone it is a common word or letter).
pub const UNITS: &[(&str, &str, bool)] = &[
    // Length.
    ("km", "km", false),
    ("kms", "km", false),
    ("kilometer", "km", false),
    ("kilometers", "km", false),
    ("kilometre", "km", false),
    ("kilometres", "km", false),
    ("mile", "mile", false),
    ("miles", "mile", false),
    ("mi", "mile", true),
    ("meter", "meter", false),
    ("meters", "meter", false),
    ("metre", "meter", false),
    ("metres", "meter", false),
    ("m", "meter", true),
    ("cm", "cm", false),
    ("centimeter", "cm", false),
    ("centimeters", "cm", false),
    ("centimetre", "cm", false),
    ("centimetres", "cm", false),
    ("mm", "mm", false),
    ("millimeter", "mm", false),
    ("millimeters", "mm", false),
    ("inch", "inch", false),
    ("inches", "inch", false),
    ("foot", "foot", false),
    ("feet", "foot", false),
    ("ft", "foot", false),
    ("yard", "yard", false),
    ("yards", "yard", false),
    ("yd", "yard", true),
    // Mass.
    ("kg", "kg", false),
    ("kgs", "kg", false),
    ("kilogram", "kg", false),
    ("kilograms", "kg", false),
    ("kilo", "kg", false),
    ("kilos", "kg", false),
    ("gram", "gram", false),
    ("grams", "gram", false),
    ("g", "gram", true),
    ("pound", "pound", false),
    ("pounds", "pound", false),
    ("lb", "pound", false),
    ("lbs", "pound", false),
    ("ounce", "ounce", false),
    ("ounces", "ounce", false),
    ("oz", "ounce", false),
    ("stone", "stone", true),
    ("ton", "ton", false),
    ("tons", "ton", false),
    ("tonne", "tonne", false),
    ("tonnes", "tonne", false),
    // Temperature.
    ("celsius", "celsius", false),
    ("centigrade", "celsius", false),
    ("c", "celsius", true),
    ("fahrenheit", "fahrenheit", false),
    ("f", "fahrenheit", true),
    ("kelvin", "kelvin", false),
    ("k", "kelvin", true),
    // Volume.
    ("liter", "liter", false),
    ("liters", "liter", false),
    ("litre", "liter", false),
    ("litres", "liter", false),
    ("l", "liter", true),
    ("ml", "ml", false),
    ("milliliter", "ml", false),
    ("milliliters", "ml", false),
    ("millilitre", "ml", false),
    ("millilitres", "ml", false),
    ("gallon", "gallon", false),
    ("gallons", "gallon", false),
    ("quart", "quart", false),
    ("quarts", "quart", false),
    ("pint", "pint", false),
    ("pints", "pint", false),
    ("cup", "cup", false),
    ("cups", "cup", false),
    ("tablespoon", "tablespoon", false),
    ("tablespoons", "tablespoon", false),
    ("tbsp", "tablespoon", false),
    ("teaspoon", "teaspoon", false),
    ("teaspoons", "teaspoon", false),
    ("tsp", "teaspoon", false),
    // Time.
    ("second", "second", true),
    ("seconds", "second", false),
    ("sec", "second", true),
    ("minute", "minute", false),
    ("minutes", "minute", false),
    ("min", "minute", true),
    ("mins", "minute", true),
    ("hour", "hour", false),
    ("hours", "hour", false),
    ("hr", "hour", true),
    ("hrs", "hour", true),
    ("h", "hour", true),
    ("day", "day", false),
    ("days", "day", false),
    ("week", "week", false),
    ("weeks", "week", false),
    ("month", "month", false),
    ("months", "month", false),
    ("year", "year", false),
    ("years", "year", false),
    // Speed, area, energy, power, data.
    ("mph", "mph", false),
    ("kph", "kph", false),
    ("kmh", "kph", false),
    ("acre", "acre", false),
    ("acres", "acre", false),
    ("hectare", "hectare", false),
    ("hectares", "hectare", false),
    ("calorie", "calorie", false),
    ("calories", "calorie", false),
    ("kcal", "calorie", false),
    ("joule", "joule", false),
    ("joules", "joule", false),
    ("kwh", "kwh", false),
    ("watt", "watt", false),
    ("watts", "watt", false),
    ("byte", "byte", false),
    ("bytes", "byte", false),
    ("bit", "bit", true),
    ("bits", "bit", false),
    ("kb", "kb", false),
    ("mb", "mb", false),
    ("gb", "gb", false),
    ("tb", "tb", false),
    ("kib", "kib", false),
    ("mib", "mib", false),
    ("gib", "gib", false),
    ("megabyte", "mb", false),
    ("megabytes", "mb", false),
    ("gigabyte", "gb", false),
    ("gigabytes", "gb", false),
    ("terabyte", "tb", false),
    ("terabytes", "tb", false),
    ("kilobyte", "kb", false),
    ("kilobytes", "kb", false),
    ("percent", "percent", false),
    ("percentage", "percent", false),
    ("%", "percent", false),
    // Currencies.
    ("$", "usd", false),
    ("usd", "usd", false),
    ("dollar", "usd", false),
    ("dollars", "usd", false),
    ("€", "eur", false),
    ("eur", "eur", false),
    ("euro", "eur", false),
    ("euros", "eur", false),
    ("£", "gbp", false),
    ("gbp", "gbp", false),
    ("sterling", "gbp", false),
    ("¥", "jpy", false),
    ("jpy", "jpy", false),
    ("yen", "jpy", false),
    ("yuan", "cny", false),
    ("rmb", "cny", false),
    ("cny", "cny", false),
    ("₹", "inr", false),
    ("inr", "inr", false),
    ("rupee", "inr", false),
    ("rupees", "inr", false),
    ("franc", "chf", false),
    ("francs", "chf", false),
    ("chf", "chf", false),
    ("peso", "mxn", false),
    ("pesos", "mxn", false),
    ("mxn", "mxn", false),
    ("cad", "cad", false),
    ("aud", "aud", false),
    ("btc", "btc", false),
    ("bitcoin", "btc", false),
    ("eth", "eth", false),
    ("ether", "eth", false),
    // Time zones.
    ("utc", "utc", false),
    ("gmt", "gmt", false),
    ("est", "est", false),
    ("edt", "est", false),
    ("pst", "pst", false),
    ("pdt", "pst", false),
    ("cst", "cst", false),
    ("cet", "cet", false),
    ("cest", "cet", false),
    ("ist", "ist", false),
    ("jst", "jst", false),
    ("bst", "bst", false),
    // Languages (a translation's source and target).
    ("english", "english", false),
    ("french", "french", false),
    ("spanish", "spanish", false),
    ("german", "german", false),
    ("italian", "italian", false),
    ("portuguese", "portuguese", false),
    ("chinese", "chinese", false),
    ("mandarin", "chinese", false),
    ("cantonese", "cantonese", false),
    ("japanese", "japanese", false),
    ("korean", "korean", false),
    ("russian", "russian", false),
    ("arabic", "arabic", false),
    ("hindi", "hindi", false),
    ("dutch", "dutch", false),
    ("swedish", "swedish", false),
    ("norwegian", "norwegian", false),
    ("danish", "danish", false),
    ("finnish", "finnish", false),
    ("polish", "polish", false),
    ("turkish", "turkish", false),
    ("greek", "greek", false),
    ("hebrew", "hebrew", false),
    ("latin", "latin", false),
    ("vietnamese", "vietnamese", false),
    ("thai", "thai", false),
    ("indonesian", "indonesian", false),
    ("ukrainian", "ukrainian", false),
    ("czech", "czech", false),
    ("romanian", "romanian", false),
    ("hungarian", "hungarian", false),
    ("persian", "persian", false),
    ("farsi", "persian", false),
    ("swahili", "swahili", false),
    ("bengali", "bengali", false),
    ("urdu", "urdu", false),
    ("tamil", "tamil", false),
    // Programming languages, data formats and number systems (a conversion's ends).
    ("python", "python", false),
    ("javascript", "javascript", false),
    ("js", "javascript", false),
    ("typescript", "typescript", false),
    ("java", "java", false),
    ("rust", "rust", false),
    ("golang", "golang", false),
    ("ruby", "ruby", false),
    ("php", "php", false),
    ("swift", "swift", false),
    ("kotlin", "kotlin", false),
    ("scala", "scala", false),
    ("perl", "perl", false),
    ("haskell", "haskell", false),
    ("lua", "lua", false),
    ("matlab", "matlab", false),
    ("julia", "julia", false),
    ("fortran", "fortran", false),
    ("cobol", "cobol", false),
    ("elixir", "elixir", false),
    ("erlang", "erlang", false),
    ("clojure", "clojure", false),
    ("dart", "dart", false),
    ("cpp", "cpp", false),
    ("csharp", "csharp", false),
    ("bash", "bash", false),
    ("powershell", "powershell", false),
    ("sql", "sql", false),
    ("json", "json", false),
    ("yaml", "yaml", false),
    ("xml", "xml", false),
    ("csv", "csv", false),
    ("html", "html", false),
    ("css", "css", false),
    ("markdown", "markdown", false),
    ("toml", "toml", false),
    ("pdf", "pdf", false),
    ("docx", "docx", false),
    ("png", "png", false),
    ("jpg", "jpg", false),
    ("jpeg", "jpg", false),
    ("decimal", "decimal", false),
    ("binary", "binary", false),
    ("hex", "hex", false),
    ("hexadecimal", "hex", false),
    ("octal", "octal", false),
    ("roman", "roman", false),
    ("uppercase", "uppercase", false),
    ("lowercase", "lowercase", false),
];

/// Words before a unit that make it a conversion's target.
pub const TARGET_MARKERS: &[&str] = &["to", "into", "in", "as", "many", "much"];

/// Words before a unit that make it a conversion's source.
pub const SOURCE_MARKERS: &[&str] = &["from", "of"];

/// Words after a unit that make it a conversion's source (`english to french`).
pub const SOURCE_BEFORE: &[&str] = &["to", "into"];

/// Month and weekday names and relative days.
pub const DATES: &[(&str, &str)] = &[
    ("january", "january"),
    ("jan", "january"),
    ("february", "february"),
    ("feb", "february"),
    ("march", "march"),
    ("april", "april"),
    ("apr", "april"),
    ("june", "june"),
    ("jun", "june"),
    ("july", "july"),
    ("jul", "july"),
    ("august", "august"),
    ("aug", "august"),
    ("september", "september"),
    ("sept", "september"),
    ("sep", "september"),
    ("october", "october"),
    ("oct", "october"),
    ("november", "november"),
    ("nov", "november"),
    ("december", "december"),
    ("dec", "december"),
    ("monday", "monday"),
    ("mon", "monday"),
    ("tuesday", "tuesday"),
    ("tue", "tuesday"),
    ("tues", "tuesday"),
    ("wednesday", "wednesday"),
    ("wed", "wednesday"),
    ("thursday", "thursday"),
    ("thu", "thursday"),
    ("thurs", "thursday"),
    ("friday", "friday"),
    ("fri", "friday"),
    ("saturday", "saturday"),
    ("sunday", "sunday"),
    ("today", "today"),
    ("tonight", "today"),
    ("tomorrow", "tomorrow"),
    ("yesterday", "yesterday"),
    ("weekend", "weekend"),
    ("weekday", "weekday"),
    ("weekdays", "weekday"),
    ("morning", "morning"),
    ("afternoon", "afternoon"),
    ("evening", "evening"),
    ("midnight", "midnight"),
    ("noon", "noon"),
    ("spring", "spring"),
    ("summer", "summer"),
    ("autumn", "autumn"),
    ("winter", "winter"),
    ("christmas", "christmas"),
    ("easter", "easter"),
    ("thanksgiving", "thanksgiving"),
    ("am", "am"),
    ("pm", "pm"),
];

/// Pairs of opposite words: the first list is one side, the second the other. A question using
/// one side only and another using the other side only ask opposite things.
pub const OPPOSITES: &[(&[&str], &[&str])] = &[
    (
        &["safe", "safely", "harmless", "ok", "okay", "fine"],
        &[
            "unsafe",
            "dangerous",
            "harmful",
            "risky",
            "hazardous",
            "toxic",
        ],
    ),
    (
        &["buy", "buying", "bought", "purchase", "purchasing"],
        &["sell", "selling", "sold"],
    ),
    (&["ascending", "increasing"], &["descending", "decreasing"]),
    (
        &[
            "increase",
            "increases",
            "raise",
            "raising",
            "rise",
            "grow",
            "gain",
            "up",
        ],
        &[
            "decrease",
            "decreases",
            "lower",
            "lowering",
            "reduce",
            "reducing",
            "fall",
            "drop",
            "shrink",
            "lose",
            "down",
        ],
    ),
    (&["before", "prior", "earlier"], &["after", "later"]),
    (
        &["above", "over", "higher", "exceed"],
        &["below", "under", "beneath", "lower"],
    ),
    (
        &[
            "max", "maximum", "largest", "biggest", "highest", "most", "greatest", "longest",
            "oldest",
        ],
        &[
            "min", "minimum", "smallest", "lowest", "least", "shortest", "youngest", "fewest",
        ],
    ),
    (
        &["more", "greater", "larger", "bigger", "longer", "older"],
        &["less", "fewer", "smaller", "shorter", "younger"],
    ),
    (&["best", "better", "top"], &["worst", "worse", "bottom"]),
    (
        &[
            "add",
            "adding",
            "insert",
            "append",
            "include",
            "install",
            "installing",
        ],
        &[
            "remove",
            "removing",
            "delete",
            "deleting",
            "drop",
            "exclude",
            "uninstall",
            "uninstalling",
        ],
    ),
    (
        &["import", "importing", "imports"],
        &["export", "exporting", "exports"],
    ),
    (
        &[
            "encrypt",
            "encrypting",
            "encryption",
            "encode",
            "encoding",
            "compress",
            "compressing",
            "zip",
        ],
        &[
            "decrypt",
            "decrypting",
            "decryption",
            "decode",
            "decoding",
            "decompress",
            "decompressing",
            "unzip",
        ],
    ),
    (
        &["enable", "enabling", "enabled", "activate", "on"],
        &["disable", "disabling", "disabled", "deactivate", "off"],
    ),
    (
        &[
            "allow",
            "allowed",
            "permit",
            "permitted",
            "accept",
            "approve",
        ],
        &[
            "deny",
            "denied",
            "forbid",
            "forbidden",
            "prohibited",
            "banned",
            "reject",
            "refuse",
            "block",
        ],
    ),
    (
        &[
            "upload",
            "uploading",
            "send",
            "sending",
            "push",
            "give",
            "lend",
            "lending",
        ],
        &[
            "download",
            "downloading",
            "receive",
            "receiving",
            "pull",
            "take",
            "borrow",
            "borrowing",
        ],
    ),
    (
        &["win", "winning", "won", "winner"],
        &["lose", "losing", "lost", "loser"],
    ),
    (
        &["true", "yes", "correct", "right"],
        &["false", "wrong", "incorrect"],
    ),
    (
        &[
            "hot", "hotter", "hottest", "warm", "warmer", "warmest", "heat", "heating",
        ],
        &[
            "cold", "colder", "coldest", "cool", "cooler", "coolest", "chill", "cooling", "freeze",
            "frozen",
        ],
    ),
    (
        &[
            "positive",
            "pros",
            "advantages",
            "benefits",
            "good",
            "healthy",
        ],
        &[
            "negative",
            "cons",
            "disadvantages",
            "drawbacks",
            "bad",
            "unhealthy",
            "harms",
        ],
    ),
    (
        &["legal", "lawful", "valid"],
        &["illegal", "unlawful", "invalid"],
    ),
    (&["possible", "likely"], &["impossible", "unlikely"]),
    (
        &[
            "open", "opens", "opened", "opening", "start", "starts", "started", "starting",
            "begin", "launch",
        ],
        &[
            "close", "closes", "closed", "closing", "stop", "stops", "stopped", "stopping", "end",
            "quit", "kill", "shut",
        ],
    ),
    (&["input", "inputs"], &["output", "outputs"]),
    (&["left"], &["right"]),
    (&["north", "northern"], &["south", "southern"]),
    (&["east", "eastern"], &["west", "western"]),
    (
        &["first", "earliest", "beginning"],
        &["last", "latest", "final"],
    ),
    (
        &["next", "following", "upcoming", "coming", "future"],
        &["previous", "prior", "past", "last"],
    ),
    (
        &["fast", "faster", "fastest", "quick", "quickly"],
        &["slow", "slower", "slowest", "slowly"],
    ),
    (
        &["cheap", "cheaper", "cheapest", "inexpensive"],
        &["expensive", "pricier", "costly"],
    ),
    (&["with", "including"], &["without", "excluding"]),
    (
        &[
            "male", "man", "men", "boy", "boys", "husband", "father", "son",
        ],
        &[
            "female", "woman", "women", "girl", "girls", "wife", "mother", "daughter",
        ],
    ),
    (
        &["import", "inbound", "incoming"],
        &["export", "outbound", "outgoing"],
    ),
    (
        &["always", "all", "every", "everyone", "everything"],
        &["never", "none", "nobody", "nothing"],
    ),
    (&["love", "loves"], &["hate", "hates"]),
    (&["agree", "support"], &["disagree", "oppose", "against"]),
    (
        &["success", "succeed", "pass", "passed"],
        &["failure", "fail", "failed", "fails"],
    ),
    (
        &["inside", "internal", "inner", "indoor"],
        &["outside", "external", "outer", "outdoor"],
    ),
    (&["upper", "uppercase"], &["lower", "lowercase"]),
    (&["minimize", "minimise"], &["maximize", "maximise"]),
    (&["private"], &["public"]),
    (
        &["sync", "synchronous", "blocking"],
        &["async", "asynchronous", "nonblocking"],
    ),
    (&["debit"], &["credit"]),
    (&["profit", "profits"], &["loss", "losses"]),
    (&["asset", "assets"], &["liability", "liabilities"]),
    (
        &["deposit", "deposits"],
        &["withdraw", "withdrawal", "withdrawals"],
    ),
    (&["hire", "hiring"], &["fire", "firing"]),
    (
        &["attack", "offense", "offensive"],
        &["defend", "defense", "defensive"],
    ),
    (&["sweet"], &["sour", "bitter"]),
    (&["wet"], &["dry"]),
    (&["rich"], &["poor"]),
    (&["easy", "simple"], &["hard", "difficult"]),
    (&["light", "lightweight"], &["heavy", "heavyweight"]),
    (&["vegan", "vegetarian"], &["meat"]),
    (&["new", "newer", "newest"], &["old", "older", "oldest"]),
    (&["lend", "lender"], &["borrow", "borrower"]),
];

/// Prefixes that negate a word (`legal`/`illegal`), tried on words of at least 4 letters.
pub const NEGATING_PREFIXES: &[&str] = &["un", "in", "im", "il", "ir", "dis", "non", "non-"];

/// Words that are never names, even with a capital inside a sentence (title case, `I`).
pub const NEVER_NAMES: &[&str] = &[
    "i", "i'm", "i've", "i'd", "i'll", "a", "an", "the", "what", "how", "why", "when", "where",
    "who", "whom", "which", "is", "are", "was", "were", "be", "do", "does", "did", "can", "could",
    "should", "would", "will", "shall", "may", "might", "must", "please", "tell", "me", "my",
    "mine", "you", "your", "we", "our", "they", "their", "he", "she", "his", "her", "it", "its",
    "give", "explain", "describe", "list", "show", "hi", "hello", "hey", "thanks", "thank", "ok",
    "okay", "yes", "no", "and", "or", "but", "if", "then", "in", "on", "at", "for", "to", "of",
    "with", "about", "from", "by", "as", "this", "that", "these", "those", "there", "here", "q",
    "a", "note", "question", "answer", "help", "need", "want",
];

/// A word's side of each pair it belongs to: `(pair index, side)`.
pub static SIDES: LazyLock<HashMap<&'static str, Vec<(u16, u8)>>> = LazyLock::new(|| {
    let mut map: HashMap<&'static str, Vec<(u16, u8)>> = HashMap::new();
    for (i, (left, right)) in OPPOSITES.iter().enumerate() {
        let i = u16::try_from(i).unwrap_or(u16::MAX);
        for (side, words) in [(0u8, *left), (1u8, *right)] {
            for w in words {
                map.entry(w).or_default().push((i, side));
            }
        }
    }
    map
});

pub static UNIT_MAP: LazyLock<HashMap<&'static str, (&'static str, bool)>> =
    LazyLock::new(|| UNITS.iter().map(|&(a, c, b)| (a, (c, b))).collect());

pub static DATE_MAP: LazyLock<HashMap<&'static str, &'static str>> =
    LazyLock::new(|| DATES.iter().copied().collect());

pub static NUMBER_MAP: LazyLock<HashMap<&'static str, u64>> =
    LazyLock::new(|| NUMBERS.iter().copied().collect());

pub static SCALE_MAP: LazyLock<HashMap<&'static str, u64>> =
    LazyLock::new(|| SCALES.iter().copied().collect());

pub static NEVER_NAME_SET: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| NEVER_NAMES.iter().copied().collect());

/// The built-in names, each as its folded words.
pub static NAMES: LazyLock<HashSet<Vec<&'static str>>> = LazyLock::new(|| {
    include_str!("entities.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(' ').collect())
        .collect()
});

/// The first words of the built-in names: most words start none, and need no further look-up.
pub static NAME_STARTS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| NAMES.iter().filter_map(|n| n.first().copied()).collect());

/// The most words a built-in name has.
pub const LONGEST_NAME: usize = 4;
