"""The pattern cards: every card parses, cards and operators agree in both directions,
broken cards are named, and the ``ptogym patterns`` command lists, shows and graphs."""
import json

import pytest

from ptogym.cli import main
from ptogym.patterns import CardError, check_library, edges, load_cards, operator_claims, parse_card, select

REQUIRED = {"AT-03", "AT-05", "AT-06", "AT-09", "AT-10", "AT-11", "SK-03", "SK-04", "SK-05"}


@pytest.fixture(scope="module")
def cards():
    return load_cards()


def test_required_cards_parse(cards):
    assert REQUIRED <= set(cards)
    for card in cards.values():
        assert card.title and card.description and card.flow_pattern and card.body
        assert set(card.flow) <= {"V", "C"}, card.id


def test_cards_and_operators_agree(cards):
    assert check_library(cards, operator_claims()) == []


def test_every_registered_operator_with_claims_is_listed(cards):
    claims = operator_claims()
    for op in ("rms_norm", "per_token_quant", "dequant", "linear", "rms_norm_linear", "rms_norm_linear_quant"):
        assert claims[op], f"{op} claims no pattern"
        for pattern in claims[op]:
            assert op in cards[pattern].used_by


def test_mismatches_are_named(cards):
    claims = dict(operator_claims())
    claims["rms_norm"] = ("AT-03", "AT-99")  # a claim without a card
    claims.pop("dequant")  # AT-06 now names an operator that is not registered
    claims["linear"] = ("AT-09",)  # AT-06 lists linear, which no longer claims it
    problems = check_library(cards, claims)
    assert "rms_norm: claims AT-99, which has no card" in problems
    assert "AT-06: used_by names 'dequant', which is not a registered operator" in problems
    assert "AT-06: used_by names 'linear', which does not claim AT-06 in SPEC.extra" in problems
    assert len(problems) == 3


def _write(tmp_path, name, head):
    path = tmp_path / name
    path.write_text("---\n" + head + "\n---\nbody\n")
    return path


GOOD = ('id: AT-77\ntitle: t\ndescription: d\ntags: ["x"]\nflow_pattern: ["V"]\ndepends_on: []\nused_by: []\n'
        'parameters: {}\ntuning: {}')


@pytest.mark.parametrize("name, head, message", [
    ("AT-77-x.md", GOOD.replace("tuning: {}", ""), "field 'tuning' missing"),
    ("AT-77-x.md", GOOD.replace('tags: ["x"]', 'tags: ["x"'), "tags: invalid JSON"),
    ("AT-77-x.md", GOOD.replace('tags: ["x"]', "tags: x"), "field 'tags' must be a list"),
    ("AT-78-x.md", GOOD, "id 'AT-77' must be AT-nn or SK-nn and start the file name"),
    ("AT-77-x.md", GOOD + "\ncolour: red", "expected one of id"),
])
def test_broken_card_is_named(tmp_path, name, head, message):
    with pytest.raises(CardError, match=message):
        parse_card(_write(tmp_path, name, head))
    assert parse_card(_write(tmp_path, "AT-77-ok.md", GOOD)).id == "AT-77"


def test_select_by_tag_and_flow(cards):
    assert {c.id for c in select(cards, flow="V,C")} >= {"AT-10", "AT-11", "SK-03"}
    assert "AT-09" not in {c.id for c in select(cards, flow="V,C")}  # C,V only
    assert {c.id for c in select(cards, tag="quant", flow="C,V")} == {"AT-09", "AT-11"}


def test_graph_edges(cards):
    graph = edges(cards)
    assert ("AT-03", "AT-10", "depends_on") in graph and ("AT-10", "rms_norm_linear", "used_by") in graph


def test_cli_list_json_show_graph(capsys, tmp_path):
    assert main(["patterns", "--tag", "norm"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "[PATTERNS_OK]" and any(line.startswith("AT-03") for line in out)

    assert main(["patterns", "--json", "--flow", "V,C,V"]) == 0
    captured = capsys.readouterr()
    assert [c["id"] for c in json.loads(captured.out)] == ["AT-11", "SK-01", "SK-02", "SK-05", "SK-07"]
    assert captured.err.strip() == "[PATTERNS_OK]"

    assert main(["patterns", "show", "AT-10"]) == 0
    out = capsys.readouterr().out
    assert "## AT-10" in out and "rms_norm_linear" in out and out.splitlines()[-1] == "[PATTERNS_OK]"

    # a model operator's figures are in its README, not in measured.json: the show says where
    assert main(["patterns", "show", "SK-04"]) == 0
    out = capsys.readouterr().out
    assert "its figures: ptogym/ops/mla_prolog/README.md" in out and out.splitlines()[-1] == "[PATTERNS_OK]"

    plot = tmp_path / "graph.png"
    assert main(["patterns", "graph", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "AT-03 -> AT-10  (depends_on)" in out and plot.stat().st_size > 1000


@pytest.mark.parametrize("argv, message", [(["patterns", "show", "AT-42"], "unknown pattern 'AT-42'"),
                                           (["patterns", "show"], "needs a pattern id"),
                                           (["patterns", "--tag", "nope"], "no card matches")])
def test_cli_errors_end_with_the_error_verdict(capsys, argv, message):
    assert main(argv) == 2
    out = capsys.readouterr().out
    assert message in out and out.splitlines()[-1] == "[PATTERNS_ERROR]"
