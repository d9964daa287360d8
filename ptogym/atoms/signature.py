"""Optional kernel inputs without a parameter the kernel never reads.

A jit kernel's signature is its source, one for every configuration; an input that a
configuration does not read (a bias, a rotation matrix, an index) would still be a
tensor parameter nobody reads or writes (A-OUT-01).  Its annotation is evaluated when
the kernel is built, though: ``optional_input`` makes it a tensor where the
configuration reads it and ``None`` where not, which turns the parameter into a
non-tensor one the caller passes ``None`` for (the interpreter takes it, and so does
real pypto 0.2.0: a probe kernel with such a parameter compiled and computed right
under pypto-sim).  pypto's
jit takes every tensor parameter before the non-tensor ones, so optional inputs come
last, and the present ones must come before the absent ones.
"""


def optional_input(pypto, present: bool, shape, dtype):
    """The annotation of an optional input: ``pypto.Tensor(shape, dtype)`` or None."""
    return pypto.Tensor(shape, dtype) if present else None
