"""``pypto.distributed`` (pypto.op.distributed): SHMEM communication between NPUs.
Not emulated: every name raises NotImplementedError saying why (see unsupported)."""
from __future__ import annotations

from ..controls import to_syms  # noqa: F401
from ..dtypes import DataType  # noqa: F401
from ..enums import AtomicType, OpType  # noqa: F401
from ..frontend import loop  # noqa: F401
from ..operation import op_wrapper  # noqa: F401
from ..symbolic import SymbolicScalar  # noqa: F401
from ..tensor import Tensor  # noqa: F401
from .unsupported import MULTI_DEVICE, not_emulatable, not_emulatable_class

ShmemTensor = not_emulatable_class("distributed.ShmemTensor", MULTI_DEVICE)
create_shmem_tensor = not_emulatable("distributed.create_shmem_tensor", MULTI_DEVICE)
create_shmem_signal = not_emulatable("distributed.create_shmem_signal", MULTI_DEVICE)
shmem_view = not_emulatable("distributed.shmem_view", MULTI_DEVICE)
shmem_put = not_emulatable("distributed.shmem_put", MULTI_DEVICE)
shmem_get = not_emulatable("distributed.shmem_get", MULTI_DEVICE)
shmem_signal = not_emulatable("distributed.shmem_signal", MULTI_DEVICE)
shmem_wait_until = not_emulatable("distributed.shmem_wait_until", MULTI_DEVICE)
shmem_barrier_all = not_emulatable("distributed.shmem_barrier_all", MULTI_DEVICE)
shmem_clear_data = not_emulatable("distributed.shmem_clear_data", MULTI_DEVICE)
shmem_clear_signal = not_emulatable("distributed.shmem_clear_signal", MULTI_DEVICE)
my_symbolic_pe = not_emulatable("distributed.my_symbolic_pe", MULTI_DEVICE)
