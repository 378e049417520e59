"""Generates the labelled sentences the personal-name/place detector (`models/pii_ner`) learns from.

No token-classification data set can be fetched here, so the sentences are written from
hand-made templates filled by `faker` (pinned in requirements.txt) with names, places and
companies from several locales, under a fixed seed: the same pins give the same sentences.
Every sentence carries its entities as character spans `(start, end, type)` over the text.

The templates read like prompts people send to a model (write, summarise, book, translate ...).
Besides sentences with PERSON, LOCATION and ORGANIZATION slots there are hard negatives: product
names, months and weekdays (several are also first names), e-mail addresses and code identifiers
built from names and cities, company names, and plain text with capitalised common words.

Train and held-out sentences come from different templates (`held_out` below), never from the
same one, so the held-out figures measure sentences whose wording the model has not seen.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from faker import Faker

SEED = 20261207
# Every fifth template (positions 2, 7, 12, ...) is held out; the rest are training templates.
HELD_OUT_EVERY, HELD_OUT_AT = 5, 2
TRAIN_PER_TEMPLATE = 36
HELD_OUT_PER_TEMPLATE = 24

NAME_LOCALES = [
    "en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pt_BR",
    "pl_PL", "sv_SE", "en_IN", "da_DK", "cs_CZ",
]  # fmt: skip
# it_IT is left out of places: its city() depends on the process hash seed, so it is not
# reproducible under a fixed seed.
CITY_LOCALES = ["en_US", "en_GB", "de_DE", "nl_NL", "pl_PL", "sv_SE", "en_IN", "da_DK", "cs_CZ"]
COMPANY_LOCALES = ["en_US", "en_GB", "de_DE", "es_ES", "it_IT", "sv_SE", "da_DK"]
WORLD_CITIES = [
    "London", "Paris", "Tokyo", "New York", "Berlin", "Madrid", "Rome", "Lisbon", "Dublin",
    "Toronto", "Sydney", "Melbourne", "Mumbai", "Delhi", "Singapore", "Seoul", "Beijing",
    "Shanghai", "São Paulo", "Buenos Aires", "Mexico City", "Cairo", "Nairobi", "Lagos",
    "Istanbul", "Vienna", "Prague", "Warsaw", "Stockholm", "Oslo", "Helsinki", "Copenhagen",
    "Amsterdam", "Brussels", "Zurich", "Geneva", "Munich", "Hamburg", "Barcelona", "Milan",
    "Chicago", "Boston", "San Francisco", "Los Angeles", "Seattle", "Austin", "Denver",
    "Vancouver", "Montreal", "Cape Town", "Johannesburg", "Bangkok", "Jakarta", "Manila",
    "Hanoi", "Kyoto", "Osaka", "Athens", "Budapest", "Kraków", "Edinburgh", "Manchester",
    "Lyon", "Marseille", "Valencia", "Seville", "Porto", "Florence", "Naples", "Dubai",
]  # fmt: skip
TITLES = ["Dr.", "Mr.", "Ms.", "Mrs.", "Prof."]
PRODUCTS = [
    "iPhone 15", "Galaxy S24", "PlayStation 5", "Kindle", "Excel", "PowerPoint", "Photoshop",
    "Kubernetes", "PostgreSQL", "ThinkPad", "Pixel 8", "Surface Pro", "AirPods", "Slack",
    "Jira", "Figma", "Notion", "TensorFlow", "React", "Django", "Windows 11", "Ubuntu",
    "Outlook", "Firefox", "Chrome", "Docker", "Terraform", "Redis", "Kafka", "Spark",
    "Model 3", "Xbox", "MacBook Air", "Apple Watch", "Fitbit", "Roomba", "Nespresso",
]  # fmt: skip
MONTHS = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]  # fmt: skip
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
TOPICS = [
    "Python", "Rust", "SQL", "Java", "Kotlin", "Bash", "TypeScript", "Go", "Excel formulas",
    "quantum computing", "French grammar", "Spanish verbs", "the Roman Empire", "photosynthesis",
    "Bayesian statistics", "the French Revolution", "World War II", "Shakespeare", "Christmas",
    "Easter", "Ramadan", "the Olympics", "the Renaissance", "Impressionism", "Linux",
]  # fmt: skip
IDENT_WORDS = ["config", "handler", "client", "cluster", "service", "test", "db", "cache", "job", "api"]

# Slots: {P}/{P2} person, {L}/{L2} place, {O} organisation; the rest are never entities.
TEMPLATES = [
    "Write a short thank-you note to {P} for the help with the move.",
    "Can you draft an email to {P} asking whether the meeting in {L} is still on?",
    "Summarise this message from {P}: the shipment to {L} is delayed by a week.",
    "{P} will present the quarterly results at the {O} office in {L}.",
    "Book a table for two in {L} on {DAY} evening, under the name {P}.",
    "My manager {P} wants the report before {MONTH} ends.",
    "Translate into German: {P} lives in {L} and works for {O}.",
    "Remind me to call {P} on {DAY} about the invoice.",
    "I am flying from {L} to {L2} next {MONTH} with {P}.",
    "Please review the contract {O} sent to {P} yesterday.",
    "What is the best way to get from the airport to the city centre of {L}?",
    "Write a cover letter for {P}, who is applying to {O} in {L}.",
    "{P} and {P2} are organising the workshop; list what they need.",
    "Is it cold in {L} during {MONTH}?",
    "Tell {P} that the {PRODUCT} order has shipped.",
    "Our customer {P} from {L} reported a bug in {PRODUCT}.",
    "Plan a three-day trip to {L} for {P} and her family.",
    "Who should {P} contact at {O} about the refund?",
    "Rewrite this politely: {P}, you missed the deadline again.",
    "The new branch of {O} opens in {L} on {DAY}.",
    "Hi, I'm {P} and I need help with my {PRODUCT} settings.",
    "Compare the cost of living in {L} and {L2} for a student.",
    "Create a birthday message for {P} from the whole team at {O}.",
    "{P} said the conference moved from {L} to {L2}.",
    "Schedule an interview with {P} for {DAY} at ten.",
    "Write a LinkedIn recommendation for {P}, a data engineer at {O}.",
    "What documents does {P} need to rent a flat in {L}?",
    "Please ask {P} to send the slides to {P2} before {DAY}.",
    "Describe the history of {L} in three sentences.",
    "The package for {P} was left at the depot in {L}.",
    "Draft a reply to {P} declining the offer from {O}.",
    "Send the minutes to {P}; {P2} was absent on {DAY}.",
    "Help me write a speech for {P}'s retirement party in {L}.",
    "Find flights from {L} to {L2} for {P} in {MONTH}.",
    "{O} hired {P} as head of sales for the {L} region.",
    "Can you explain why {P} was charged twice by {O}?",
    "Let {P} know the delivery to {L} arrives on {DAY}.",
    "I met {P} at a cafe in {L} last {MONTH}.",
    "Generate a short bio for {P}, a photographer based in {L}.",
    "Forward this complaint from {P} to the {O} support team.",
    "We are moving our data centre from {L} to {L2} with {O}.",
    "Make a packing list for {P}'s hiking trip near {L}.",
    "{P} asked whether {O} ships to {L}.",
    "Write a poem about {L} in {MONTH}.",
    "Please correct the spelling in this note to {P}: see you in {L}.",
    "My neighbour {P} recommended a dentist in {L}.",
    "Prepare an agenda for the call between {P} and {O} on {DAY}.",
    "How far is {L} from {L2} by train?",
    "Invoice number 4411 for {P} is overdue; write a reminder.",
    "Congratulate {P} on the promotion at {O}.",
]
NEGATIVE_TEMPLATES = [
    "Explain how to set up {PRODUCT} on a new laptop.",
    "What changed in {PRODUCT} this {MONTH}?",
    "Write unit tests for the function {IDENT} in {TOPIC}.",
    "Why does {IDENT} return null when the cache is empty?",
    "Send the logs to {EMAIL} before {DAY}.",
    "My email is {EMAIL}, please update the account.",
    "Summarise the key ideas of {TOPIC} for a beginner.",
    "Rename the variable {IDENT} to something clearer.",
    "The deploy of {IDENT} failed again on {DAY} night.",
    "Compare {PRODUCT} and {PRODUCT2} for a small team.",
    "Can you recommend a good book about {TOPIC}?",
    "Every {DAY} in {MONTH} the office closes early.",
    "Grant read access to {EMAIL} on the {IDENT} bucket.",
    "Happy new year! What are good resolutions for {MONTH}?",
    "Mark all tickets about {PRODUCT} as resolved.",
    "Please explain the difference between a list and a tuple in {TOPIC}.",
    "Quick question: does {PRODUCT} support dark mode?",
    "Write a haiku about {MONTH} rain.",
    "the build is broken again, can you check the {IDENT} pipeline",
    "can you summarise this article about {TOPIC} in plain words",
    "Set a reminder for {DAY} at nine to renew the {PRODUCT} licence.",
    "Order Number 88213 has not arrived yet, what should I do?",
    "Version 2.4.1 of {PRODUCT} breaks the {IDENT} integration.",
    "Give me ten ideas for a team offsite in {MONTH}.",
    "Reset the password for {EMAIL} and notify the admins.",
]


@dataclass
class Sentence:
    text: str
    entities: list[tuple[int, int, str]] = field(default_factory=list)  # char offsets, end exclusive
    template: int = 0


class Filler:
    """Draws slot values; one Faker per locale, all seeded from SEED."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.fakers: dict[str, Faker] = {}
        for i, locale in enumerate(sorted(set(NAME_LOCALES + CITY_LOCALES + COMPANY_LOCALES))):
            fake = Faker(locale)
            fake.seed_instance(SEED + i)
            self.fakers[locale] = fake

    def _fake(self, locales: list[str]) -> Faker:
        return self.fakers[self.rng.choice(locales)]

    def person(self) -> list[tuple[str, bool]]:
        """Pieces of text; True marks the part that is the entity (titles are not)."""
        fake = self._fake(NAME_LOCALES)
        first, last = fake.first_name(), fake.last_name()
        form = self.rng.random()
        if form < 0.4:
            return [(f"{first} {last}", True)]
        if form < 0.6:
            return [(first, True)]
        if form < 0.75:
            return [(self.rng.choice(TITLES) + " ", False), (last, True)]
        if form < 0.9:
            return [(f"{first} {fake.random_uppercase_letter()}. {last}", True)]
        return [(f"{first} {fake.first_name()} {last}", True)]

    def place(self) -> list[tuple[str, bool]]:
        form = self.rng.random()
        if form < 0.35:
            return [(self.rng.choice(WORLD_CITIES), True)]
        if form < 0.6:
            return [(self._fake(CITY_LOCALES).city(), True)]
        if form < 0.85:
            return [(self.fakers["en_US"].country(), True)]
        city = self.rng.choice(WORLD_CITIES + [self._fake(CITY_LOCALES).city()])
        return [(city, True), (", ", False), (self.fakers["en_US"].country(), True)]

    def company(self) -> str:
        return self._fake(COMPANY_LOCALES).company()

    def ident(self) -> str:
        fake = self._fake(["en_US", "de_DE", "en_GB"])
        base = self.rng.choice([fake.first_name(), fake.last_name(), self.rng.choice(WORLD_CITIES)])
        word = self.rng.choice(IDENT_WORDS)
        base = re.sub(r"[^A-Za-z]", "", base) or "main"
        form = self.rng.random()
        if form < 0.4:
            return f"{base.lower()}_{word}"
        if form < 0.7:
            return f"get{base}{word.capitalize()}()"
        return f"{base.lower()}-{word}-{self.rng.randint(1, 9)}"

    def email(self) -> str:
        fake = self._fake(["en_US", "en_GB", "de_DE", "fr_FR"])
        return fake.email()


SLOT = re.compile(r"\{(\w+)\}")


def fill(template: str, filler: Filler, index: int) -> Sentence:
    sentence = Sentence("", [], index)
    pos = 0
    pieces: list[tuple[str, str | None]] = []
    for match in SLOT.finditer(template):
        pieces.append((template[pos : match.start()], None))
        slot = match.group(1)
        if slot in ("P", "P2"):
            pieces.extend((text, "PERSON" if is_entity else None) for text, is_entity in filler.person())
        elif slot in ("L", "L2"):
            pieces.extend((text, "LOCATION" if is_entity else None) for text, is_entity in filler.place())
        elif slot == "O":
            pieces.append((filler.company(), "ORGANIZATION"))
        elif slot in ("PRODUCT", "PRODUCT2"):
            pieces.append((filler.rng.choice(PRODUCTS), None))
        elif slot == "MONTH":
            pieces.append((filler.rng.choice(MONTHS), None))
        elif slot == "DAY":
            pieces.append((filler.rng.choice(DAYS), None))
        elif slot == "TOPIC":
            pieces.append((filler.rng.choice(TOPICS), None))
        elif slot == "IDENT":
            pieces.append((filler.ident(), None))
        elif slot == "EMAIL":
            pieces.append((filler.email(), None))
        else:
            raise ValueError(f"template {index}: unknown slot {slot}")
        pos = match.end()
    pieces.append((template[pos:], None))
    text = ""
    for piece, kind in pieces:
        if kind is not None:
            sentence.entities.append((len(text), len(text) + len(piece), kind))
        text += piece
    sentence.text = text
    return sentence


def held_out(index: int) -> bool:
    return index % HELD_OUT_EVERY == HELD_OUT_AT


def generate() -> dict[str, list[Sentence]]:
    """Train and held-out sentences, deterministic for SEED and the pinned faker."""
    rng = random.Random(SEED)
    filler = Filler(rng)
    splits: dict[str, list[Sentence]] = {"train": [], "held_out": []}
    for index, template in enumerate(TEMPLATES + NEGATIVE_TEMPLATES):
        split = "held_out" if held_out(index) else "train"
        count = HELD_OUT_PER_TEMPLATE if split == "held_out" else TRAIN_PER_TEMPLATE
        seen: set[str] = set()
        for _ in range(count * 3):
            if len(seen) == count:
                break
            sentence = fill(template, filler, index)
            if sentence.text in seen:
                continue
            seen.add(sentence.text)
            splits[split].append(sentence)
    return splits


if __name__ == "__main__":
    data = generate()
    for split, rows in data.items():
        kinds = ("PERSON", "LOCATION", "ORGANIZATION")
        n = {k: sum(1 for s in rows for e in s.entities if e[2] == k) for k in kinds}
        print(split, len(rows), n)
    for s in data["train"][::97][:12]:
        print(s.text, [(s.text[a:b], k) for a, b, k in s.entities])
