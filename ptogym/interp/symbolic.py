"""Symbolic scalars: dynamic dims and loop indices that carry their concrete value.

On a device these are runtime values, unknown while the graph is built, so a kernel
may only use them where PyPTO accepts symbols (loop bounds, view offsets,
valid_shape, arithmetic, ``.min``/``.max``).  The interpreter knows the value and
computes with it, but refuses the Python conversions a real build cannot do.
"""
from __future__ import annotations

import dis
import linecache
import operator
import os
import re
import sys

from .checks import violation


class SymbolicScalar:
    """A runtime integer.  ``expr`` is how a kernel would print it; ``value`` is what
    it is during this run; an ``if`` on it is a runtime condition (pypto's parser
    compiles it), evaluated here with the value."""

    __slots__ = ("value", "expr", "loop", "is_variable", "named_constant")

    def __init__(self, value, expr=None, *, loop=None):
        named_constant = False
        if isinstance(value, SymbolicScalar):
            value, expr, named_constant = value.value, expr or value.expr, value.named_constant
        elif isinstance(value, str):  # pypto.SymbolicScalar("name", value): a named constant
            named_constant = isinstance(expr, int)
            value, expr = (expr if named_constant else 0), value
        self.value = int(value)
        self.expr = expr if expr is not None else str(self.value)
        self.loop = loop
        self.is_variable = False
        # pypto: a name given a value is concrete (upstream examples' symbolic_scalar.py)
        self.named_constant = named_constant

    # --- what pypto offers -------------------------------------------------------
    def min(self, other) -> "SymbolicScalar":
        return self._extremum(min, other)

    def max(self, other) -> "SymbolicScalar":
        return self._extremum(max, other)

    def _extremum(self, pick, other) -> "SymbolicScalar":
        value = pick(self.value, _value(other))
        if self.is_concrete() and (not isinstance(other, SymbolicScalar) or other.is_concrete()):
            return SymbolicScalar(value)  # pypto folds constants (symbolic_scalar.py _binary_ops)
        return SymbolicScalar(value, f"{pick.__name__}({self.expr}, {_expr(other)})")

    def as_variable(self) -> None:
        """Mark as a named runtime variable (pypto: in place, returns None)."""
        self.is_variable = True

    def is_concrete(self) -> bool:
        return self.named_constant or self.expr == str(self.value)

    def concrete(self) -> int:
        if not self.is_concrete():
            violation("C-LOOP-03", f"concrete() on runtime value {self.expr} (= {self.value} in this run)")
        return self.value

    is_immediate = is_concrete

    def is_symbol(self) -> bool:
        """A named runtime value (a dim, a loop index), not an expression of them."""
        return not self.is_concrete() and _NAME.fullmatch(self.expr) is not None

    def is_expression(self) -> bool:
        return not self.is_concrete() and not self.is_symbol()

    # --- Python conversions a real build cannot perform --------------------------
    def __index__(self) -> int:
        caller = sys._getframe(1)
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
        if "range(" in line:
            violation("C-LOOP-02", f"range() over symbolic {self.expr} (= {self.value}); use pypto.loop")
        else:
            violation("C-LOOP-03", f"symbolic {self.expr} (= {self.value}) used as a Python index/int")
        return self.value

    def __int__(self) -> int:
        if not self.is_concrete():  # a constant converts (pypto: int(symbolic_scalar(10)) == 10, its own test)
            violation("C-LOOP-03", f"int() of symbolic {self.expr} (= {self.value})")
        return self.value

    def __bool__(self) -> bool:
        """pypto's parser branches on a runtime value only as a whole ``if``/``elif`` test
        (the frontend routes those around this method).  Whatever else needs its truth while
        the graph is built - a conditional expression, ``and``/``or``/``not``, ``assert``,
        ``bool()``, built-in ``min``/``max``, ``sorted`` - pypto refuses ("Not concrete value");
        a constant is fine."""
        if self.is_concrete():
            return bool(self.value)
        caller = sys._getframe(1)
        opname = dis.opname[caller.f_code.co_code[caller.f_lasti]]
        line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
        branching = "JUMP" in opname or opname == "UNARY_NOT"
        if branching and not _kernel_code(caller, line):  # no source to check (exec'd code), or not a kernel's
            return bool(self.value)
        if branching:
            construct = _BRANCHING.get(opname, "a conditional expression (`a if c else b`) or assert")
            violation("C-SYNTAX-01", f"{construct} on runtime value {self.expr} (= {self.value}): pypto's parser "
                                     f"refuses it (\"Not concrete value\"); branch with an `if` statement on the "
                                     f"value itself, or use pypto.min/pypto.max / .min()/.max()")
        elif _BUILTIN_MIN_MAX.search(line):
            violation("C-SYNTAX-01", f"built-in min/max over runtime value {self.expr} (= {self.value}); pypto "
                                     f"refuses it (\"Not concrete value\"): use pypto.min/pypto.max or .min()/.max()")
        else:
            violation("C-LOOP-03", f"symbolic {self.expr} (= {self.value}) used as a Python bool")
        return bool(self.value)

    def __hash__(self):
        return hash((self.value, self.expr))

    def __repr__(self) -> str:
        return f"SymbolicScalar({self.expr}={self.value})"

    def __str__(self) -> str:
        return self.expr


class IfBranch:
    """What ``pypto.cond`` returns (pypto: a ``RecordIfBranch``): true when the scalar's
    runtime value is non-zero.  Plain Python code a kernel calls may test it with ``if``;
    the kernel's own ``if`` may not (pypto's parser takes a bool or a symbolic scalar
    there, measured: C-SYNTAX-01)."""

    __slots__ = ("taken",)

    def __init__(self, taken: bool):
        self.taken = taken

    def __bool__(self) -> bool:
        return self.taken

    def __repr__(self) -> str:
        return f"IfBranch({self.taken})"


_BUILTIN_MIN_MAX = re.compile(r"(?<![\w.])(min|max)\(")
_BRANCHING = {"JUMP_IF_FALSE_OR_POP": "`and`/`or`", "JUMP_IF_TRUE_OR_POP": "`and`/`or`", "UNARY_NOT": "`not`"}
_INTERP_DIR = os.path.dirname(os.path.abspath(__file__))


def _kernel_code(frame, line: str) -> bool:
    """Whether ``frame`` runs the user's code, with its source, while a kernel runs: where
    pypto's parser would see the expression."""
    from . import runtime
    return bool(line) and runtime.in_kernel() and not frame.f_code.co_filename.startswith(_INTERP_DIR)


def _value(x) -> int:
    return x.value if isinstance(x, SymbolicScalar) else int(x)


def _expr(x) -> str:
    return x.expr if isinstance(x, SymbolicScalar) else str(x)


def _binary(op, symbol, *, reflected=False):
    def method(self, other):
        if not isinstance(other, (int, SymbolicScalar)):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        value = op(_value(a), _value(b))
        if all(not isinstance(x, SymbolicScalar) or x.is_concrete() for x in (a, b)):
            return SymbolicScalar(value)  # pypto folds constants
        return SymbolicScalar(value, f"({_expr(a)}{symbol}{_expr(b)})")  # spelled as pypto prints it
    return method


# `/` divides as `//` does (pypto's SymbolicScalar.__truediv__ is its Div: always floor division)
for _name, _op, _sym in [("add", operator.add, "+"), ("sub", operator.sub, "-"),
                         ("mul", operator.mul, "*"), ("floordiv", operator.floordiv, "//"),
                         ("truediv", operator.floordiv, "//"), ("mod", operator.mod, "%")]:
    setattr(SymbolicScalar, f"__{_name}__", _binary(_op, _sym))
    setattr(SymbolicScalar, f"__r{_name}__", _binary(_op, _sym, reflected=True))
for _name, _op, _sym in [("lt", operator.lt, "<"), ("le", operator.le, "<="), ("gt", operator.gt, ">"),
                         ("ge", operator.ge, ">="), ("eq", operator.eq, "=="), ("ne", operator.ne, "!=")]:
    setattr(SymbolicScalar, f"__{_name}__", _binary(_op, _sym))
SymbolicScalar.__neg__ = lambda self: SymbolicScalar(-self.value, None if self.is_concrete() else f"(-{self.expr})")
SymbolicScalar.__pos__ = lambda self: self
# ``~s`` is pypto's logical Not (1 where s is 0, else 0), not a bitwise complement
SymbolicScalar.__invert__ = lambda self: SymbolicScalar(int(not self.value),
                                                        None if self.is_concrete() else f"(!{self.expr})")


_NAME = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]]*\])*")


def concrete_difference(stop, start) -> int | None:
    """``stop - start`` when it does not depend on runtime values, else None.  pypto
    simplifies a slice's length symbolically (``x[i*8:(i+1)*8]`` is 8 rows)."""
    if not isinstance(stop, SymbolicScalar) and not isinstance(start, SymbolicScalar):
        return stop - start
    import sympy  # only symbolic slices pay for it

    names: dict = {}

    def placeholder(match) -> str:
        text = match.group(0)
        if text in ("min", "max"):
            return text.capitalize()
        return names.setdefault(text, f"s{len(names)}")

    try:
        length = sympy.sympify(f"({_NAME.sub(placeholder, _expr(stop))}) - ({_NAME.sub(placeholder, _expr(start))})")
    except (sympy.SympifyError, SyntaxError, TypeError):
        return None
    # two runtime values that print alike (e.g. two loops both indexed "i") are still two values
    if not length.is_Integer or int(length) != _value(stop) - _value(start):
        return None
    return int(length)


def value_of(x) -> int:
    """Concrete value of an int or SymbolicScalar (for the interpreter's own use; hot:
    ``_value`` spelled out saves a call per dim of every view and write)."""
    return x.value if isinstance(x, SymbolicScalar) else int(x)


def sym_min(a, b) -> SymbolicScalar:
    """``pypto.min``: minimum of two runtime integers."""
    return SymbolicScalar(a).min(b)


def sym_max(a, b) -> SymbolicScalar:
    return SymbolicScalar(a).max(b)


def ceildiv(a, b):
    if isinstance(a, SymbolicScalar) or isinstance(b, SymbolicScalar):
        return (a + b - 1) // b
    return -(-a // b)
