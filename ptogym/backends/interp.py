"""The default backend: kernels run eagerly on ``ptogym.interp`` (any torch device)."""
from __future__ import annotations

from .base import BackendBase


class Backend(BackendBase):
    name = "interp"

    @property
    def pypto(self):
        import ptogym.interp

        return ptogym.interp
