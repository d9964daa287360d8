"""``ptogym.interp``'s frontend has real pypto 0.2.0's signatures (recorded by
``scripts/record_frontend_signatures.py`` into ``fixtures/frontend_signatures_pypto.json``):
the same parameters, kinds and defaults.  Where the interpreter adds a last ``**unknown``
(refused as C-FRONT-01) or ``**ignored`` (A-FRONT-01 advice), it stands for what pypto
does with other keywords: raise TypeError, or ignore them.  pypto's ``loop`` and
``loop_unroll`` take ``**kwargs``; the interpreter names the keywords pypto's source reads.
What the parser rejects beyond signatures is probed in ``check_probes.py`` (``front_*``,
``syntax_*``, ``loop_*``)."""
import importlib.util
import inspect
import json
import pathlib

import pytest

import ptogym.interp as pypto
from interp_helpers import recorder_output

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "frontend_signatures_pypto.json"
RECORDED = json.loads(FIXTURE.read_text())
CATCH_ALL = {"unknown": "refused", "ignored": "ignored"}  # the interpreter's last **parameter: what it means


def resolve(path: str):
    value = pypto
    for part in path.split("."):
        value = getattr(value, part)
    return value


def parameters(func) -> list:
    return [[p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default)]
            for p in inspect.signature(func).parameters.values()]


def keyword_set(name: str) -> set:
    """The keywords pypto reads for ``name`` (loop_unroll passes the others on to loop)."""
    read = set(RECORDED[name].get("keywords_read", ()))
    return read | set(RECORDED["loop"]["keywords_read"]) if name == "loop_unroll" else read


@pytest.mark.parametrize("name", list(RECORDED))
def test_signature_matches_real_pypto(name):
    ours = parameters(resolve(name))
    if ours and ours[-1][1] == "VAR_KEYWORD" and ours[-1][0] in CATCH_ALL:
        ours = ours[:-1]
    theirs = RECORDED[name]["parameters"]
    if "keywords_read" not in RECORDED[name]:
        assert ours == theirs
        return
    # pypto: (*args, **kwargs) and keywords read from kwargs; ours: (*args, <those keywords>)
    assert [p for p in ours if p[1] != "KEYWORD_ONLY"] == [p for p in theirs if p[1] != "VAR_KEYWORD"]
    assert {p[0] for p in ours if p[1] == "KEYWORD_ONLY"} == keyword_set(name)


def test_jit_refuses_and_loop_ignores_other_keywords():
    with pytest.raises(pypto.ConstraintViolation) as info:
        pypto.frontend.jit(runtime_option={})
    assert info.value.check_id == "C-FRONT-01" and "['runtime_option']" in str(info.value)
    assert CATCH_ALL[parameters(pypto.frontend.jit)[-1][0]] == "refused"
    assert CATCH_ALL[parameters(pypto.loop)[-1][0]] == "ignored"


@pytest.mark.pypto
@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="the real pypto package is not installed")
def test_recorded_signatures_still_hold_live():
    assert recorder_output("record_frontend_signatures.py", "--print", timeout=120) == RECORDED
