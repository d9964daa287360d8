"""What a kernel module declares tunable: ``TUNING = Tuning(...)``.

A ``Tuning`` names the keyword parameters of the module's ``build`` that may be tuned
(the same ones the builder already takes), each with its candidates - a tuple, or a
function of the call's shape that returns them - and optionally a condition on other
parameters (``when``: a mapping of values, or a function of the other parameters;
a ladder matters only to the wave schedule).  ``constraints``
are functions ``(params, shape) -> str | None`` that name why a combination cannot be
built (tiles past L0/L1/UB, ``k1 % k0``); ``band(**shape)`` says which bands of the
tuned table a call reads (general to specific, e.g. a weight class, then a token
count band).  ``shape`` is the dict the operator's ``op.py`` derives from its call
(and, for a case file's level, ``SPEC.extra["tuning_shape"](case)``).

Candidates are JSON values (tuples are stored as lists and read back as tuples), so a
configuration is a small JSON object: what the database and the tuned table hold.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

#: token-count bands of the tuned tables: a call of ``rows`` tokens reads "tokens<=B",
#: B the first bound at or above it ("tokens>32768" past the last)
TOKEN_BOUNDS = (1, 16, 128, 1024, 8192, 32768)


def token_band(rows: int) -> str:
    bound = next((b for b in TOKEN_BOUNDS if rows <= b), None)
    return f"tokens<={bound}" if bound is not None else f"tokens>{TOKEN_BOUNDS[-1]}"


@dataclass(frozen=True)
class Param:
    """One tunable build parameter: its candidates (or ``candidates(shape)``), and the
    values of other parameters it matters under (``when``; else it is not sampled)."""

    candidates: Sequence | Callable[[dict], Sequence]
    when: Mapping[str, Any] | Callable[[dict], bool] = field(default_factory=dict)

    def values(self, shape: dict) -> list:
        values = self.candidates(shape) if callable(self.candidates) else self.candidates
        return [hashable(value) for value in values]


@dataclass(frozen=True)
class Tuning:
    """A kernel module's search space (see the module docstring)."""

    params: Mapping[str, Param]
    band: Callable[..., tuple]
    constraints: tuple = ()
    plain: Mapping[str, Any] = field(default_factory=dict)  # a deliberately plain configuration

    def violations(self, params: dict, shape: dict) -> list[str]:
        """Why ``params`` cannot be built for ``shape``: candidates outside a parameter's
        list, then the constraints' own words."""
        problems = []
        for name, param in self.params.items():
            if name in params and self.applies(name, params) and hashable(params[name]) not in param.values(shape):
                problems.append(f"{name}={label(params[name])} is not one of its candidates")
        return problems + [problem for check in self.constraints if (problem := check(params, shape))]

    def applies(self, name: str, params: dict) -> bool:
        """Whether parameter ``name`` matters under the other values of ``params``."""
        when = self.params[name].when
        if callable(when):
            return bool(when(params))
        return all(hashable(params.get(key)) == hashable(value) for key, value in when.items())


def hashable(value):
    """A JSON value with its lists as tuples (build kwargs are cache keys)."""
    if isinstance(value, (list, tuple)):
        return tuple(hashable(item) for item in value)
    if isinstance(value, dict):
        return {key: hashable(item) for key, item in value.items()}
    return value


def label(value) -> str:
    """The candidate as the compact JSON text Optuna samples and the database stores."""
    return json.dumps(value, separators=(",", ":"))


def config_key(params: dict) -> str:
    """One text per configuration (sorted keys): how the database finds a repeat."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))
