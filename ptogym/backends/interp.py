"""The default backend: kernels run eagerly on ``ptogym.interp`` (any torch device)."""
from __future__ import annotations

from .base import BackendBase


class Backend(BackendBase):
    name = "interp"

    @property
    def pypto(self):
        import ptogym.interp

        return ptogym.interp

    def check_available(self) -> None:
        """The interpreter runs anywhere; its settings are checked here, before any case:
        ValueError naming the variable (an unknown id in PTOGYM_SILENCE, a bad limit or
        PTOGYM_SANITIZE value)."""
        from ptogym.interp import checks, sanitizer

        checks.silenced_by_env()
        sanitizer.mode_from_env()
        for check_id in checks.LIMITS:
            checks.limit(check_id)
