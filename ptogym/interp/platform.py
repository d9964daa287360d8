"""Platform profiles: the on-chip budgets that the interpreter's checks enforce.

DAV_2201 (Atlas A2/A3, 910B) is read off pypto 0.2.0's ``lib/configs/A2A3.ini``
([SoCInfo] and [AICoreSpec]).  pypto 0.2.0 also names DAV_3510 (Ascend 950) in
``platforminfo.ini`` but ships no spec for it; its budgets below are assumptions,
marked as such, so that kernels branching on ``npuarch`` can be exercised.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class PlatformProfile:
    npuarch: str
    cube_cores: int
    vector_cores: int
    ub_bytes: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    sum_buffer_bytes: int  # reduction scratch pypto.sum holds in UB beside its input tile
    ub_block_bytes: int = 32  # A-TILE-02 alignment unit
    clock_ghz: float = 1.8
    assumed: bool = False

    def __hash__(self) -> int:  # (hot: a key of every op's checked-signature cache) equal profiles share a name
        return hash(self.npuarch)


PROFILES = {
    "DAV_2201": PlatformProfile("DAV_2201", cube_cores=24, vector_cores=48, ub_bytes=196608,
                                l1_bytes=524288, l0a_bytes=65536, l0b_bytes=65536,
                                l0c_bytes=131072, sum_buffer_bytes=65536),
    "DAV_3510": PlatformProfile("DAV_3510", cube_cores=32, vector_cores=64, ub_bytes=262144,
                                l1_bytes=524288, l0a_bytes=65536, l0b_bytes=65536,
                                l0c_bytes=262144, sum_buffer_bytes=65536, assumed=True),
}
DEFAULT = "DAV_2201"


class _Platform:
    """``pypto.platform``: ``npuarch`` names the selected profile."""

    def __init__(self):
        self._profile = None  # read from PTOGYM_PLATFORM on first use: a bad value must not break imports

    @property
    def profile(self) -> PlatformProfile:
        if self._profile is None:
            name = os.environ.get("PTOGYM_PLATFORM", "").strip() or DEFAULT
            if name not in PROFILES:
                raise ValueError(f"PTOGYM_PLATFORM: unknown platform {name!r}; known: {sorted(PROFILES)}")
            self._profile = PROFILES[name]
        return self._profile

    @profile.setter
    def profile(self, profile: PlatformProfile) -> None:
        self._profile = profile

    @property
    def npuarch(self) -> str:
        return self.profile.npuarch


platform = _Platform()


def set_platform(npuarch: str) -> None:
    """Select the profile kernels see (``pypto.platform.npuarch``) and are checked against."""
    if npuarch not in PROFILES:
        raise ValueError(f"npuarch: unknown platform {npuarch!r}; known: {sorted(PROFILES)}")
    platform.profile = PROFILES[npuarch]


@contextlib.contextmanager
def using_platform(npuarch: str):
    """Run the body against another profile (an operator built for one platform only),
    then restore the one selected before."""
    previous = platform.profile
    set_platform(npuarch)
    try:
        yield
    finally:
        platform.profile = previous
