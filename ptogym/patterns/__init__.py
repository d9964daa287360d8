"""The pattern library as data: one Markdown card per pattern in this folder.

A card is ``<ID>-<slug>.md``: front matter between ``---`` lines, then the body
(compute flow, numerics, PyPTO constraints, measured tuning table).  Front matter
lines are ``key: value``; a value starting with ``[``, ``{`` or ``"`` is JSON (so
it is also valid YAML flow style), anything else is a plain string.  Keys:

    id, title, description        strings (id: AT-nn atom or SK-nn skeleton)
    tags, flow_pattern            lists of strings (flow: V / C steps, digits number stages)
    depends_on                    ids of the cards this pattern is built from
    used_by                       ptogym operators built on it (``ptogym.ops.OP_NAMES``)
    parameters, tuning            JSON objects: instantiation parameters and the tuned
                                  configuration measured here

Operators claim the patterns they implement in ``SPEC.extra["patterns"]``;
``check_library`` requires the two sides to agree.  ``measured.json`` holds the
latest figures of ``benchmarks/bench_atoms.py`` that ``ptogym patterns show`` quotes.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

CARDS_DIR = Path(__file__).parent
MEASURED_PATH = CARDS_DIR / "measured.json"
FIELDS = {"id": str, "title": str, "description": str, "tags": list, "flow_pattern": list, "depends_on": list,
          "used_by": list, "parameters": dict, "tuning": dict}
ID_PATTERN = re.compile(r"^(AT|SK)-\d\d$")


class CardError(ValueError):
    """A card cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class Card:
    id: str
    title: str
    description: str
    tags: tuple
    flow_pattern: tuple
    depends_on: tuple
    used_by: tuple
    parameters: dict
    tuning: dict
    body: str
    path: Path

    @property
    def kind(self) -> str:
        return "atom" if self.id.startswith("AT") else "skeleton"

    @property
    def flow(self) -> tuple:
        """flow_pattern without stage numbers: ("V1", "C1") -> ("V", "C")."""
        return tuple(step.rstrip("0123456789") for step in self.flow_pattern)

    def to_json(self) -> dict:
        return {name: list(v) if isinstance(v, tuple) else v for name, v in
                ((f, getattr(self, f)) for f in FIELDS)} | {"path": str(self.path)}


def _value(text: str, where: str):
    text = text.strip()
    if text[:1] in "[{\"":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise CardError(f"{where}: invalid JSON value: {error.msg}") from None
    return text


def parse_card(path: Path) -> Card:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        raise CardError(f"{path}: a card starts with front matter between '---' lines")
    head, body = text[4:].split("\n---\n", 1)
    values = {}
    for number, line in enumerate(head.splitlines(), 2):
        if not line.strip():
            continue
        key, sep, rest = line.partition(":")
        if not sep or key not in FIELDS:
            raise CardError(f"{path}:{number}: expected one of {', '.join(FIELDS)} as 'key: value', got {line!r}")
        values[key] = _value(rest, f"{path}:{number}: {key}")
    for key, kind in FIELDS.items():
        if key not in values:
            raise CardError(f"{path}: field {key!r} missing")
        if not isinstance(values[key], kind):
            raise CardError(f"{path}: field {key!r} must be a {kind.__name__}, got {type(values[key]).__name__}")
    if not ID_PATTERN.match(values["id"]) or not path.name.startswith(values["id"] + "-"):
        raise CardError(f"{path}: id {values['id']!r} must be AT-nn or SK-nn and start the file name")
    return Card(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}, body=body.strip(),
                path=path)


def load_cards(folder: Path = CARDS_DIR) -> dict[str, Card]:
    """Every card in ``folder`` by id (sorted); raises CardError on the first broken one."""
    cards = {}
    for path in sorted(folder.glob("*.md")):
        card = parse_card(path)
        if card.id in cards:
            raise CardError(f"{path}: id {card.id} also used by {cards[card.id].path.name}")
        cards[card.id] = card
    return cards


def operator_claims() -> dict[str, tuple]:
    """Registered operator -> the pattern ids it claims (``SPEC.extra["patterns"]``)."""
    from ptogym import ops

    return {name: tuple(ops.get_op(name).extra.get("patterns", ())) for name in ops.OP_NAMES}


def check_library(cards: dict[str, Card], claims: dict[str, tuple]) -> list[str]:
    """Problems between cards and operators: unknown depends_on ids, used_by naming an
    operator that does not exist or does not claim the card, claims without a card
    or missing from the card's used_by."""
    problems = []
    for card in cards.values():
        problems += [f"{card.id}: depends_on {dep} has no card" for dep in card.depends_on if dep not in cards]
        for op in card.used_by:
            if op not in claims:
                problems.append(f"{card.id}: used_by names {op!r}, which is not a registered operator")
            elif card.id not in claims[op]:
                problems.append(f"{card.id}: used_by names {op!r}, which does not claim {card.id} in SPEC.extra")
    for op, ids in claims.items():
        for pattern in ids:
            if pattern not in cards:
                problems.append(f"{op}: claims {pattern}, which has no card")
            elif op not in cards[pattern].used_by:
                problems.append(f"{op}: claims {pattern}, whose card does not list it in used_by")
    return problems


def select(cards: dict[str, Card], tag: str | None = None, flow: str | None = None) -> list[Card]:
    """Cards with ``tag`` whose flow (stage numbers dropped) contains ``flow`` ("V,C")
    as consecutive steps."""
    wanted = tuple(step.strip().upper() for step in flow.split(",")) if flow else ()
    chosen = []
    for card in cards.values():
        if tag and tag not in card.tags:
            continue
        if wanted and not any(card.flow[i:i + len(wanted)] == wanted for i in range(len(card.flow))):
            continue
        chosen.append(card)
    return chosen


def load_measured(path: Path = MEASURED_PATH) -> dict:
    """``benchmarks/bench_atoms.py``'s latest figures: op -> level -> results ({} if none)."""
    return json.loads(path.read_text()) if path.exists() else {}


def edges(cards: dict[str, Card]) -> list[tuple[str, str, str]]:
    """(from, to, kind): a depends_on edge runs from the ingredient to the card, a
    used_by edge from the card to the operator."""
    result = [(dep, card.id, "depends_on") for card in cards.values() for dep in card.depends_on]
    return result + [(card.id, op, "used_by") for card in cards.values() for op in card.used_by]
