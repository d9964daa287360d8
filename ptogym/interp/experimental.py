"""``pypto.experimental``: the options kernels set (recorded, no effect on numbers),
the paged-KV gather ``gather_in_ub`` and ``transposed_batchmatmul``; the SHMEM
and cube-side gather entries raise NotImplementedError with the reason."""
from __future__ import annotations


from .checks import violation
from .config import get_operation_options, set_operation_options, set_options  # noqa: F401
from .controls import to_syms  # noqa: F401
from .enums import AtomicType  # noqa: F401
from .operation import op_wrapper  # noqa: F401
from .ops.distributed import ShmemTensor  # noqa: F401
from .ops.matmul import matmul
from .ops.unsupported import MULTI_DEVICE, NPU_INTERNAL, get_current_scope, not_emulatable  # noqa: F401
from .symbolic import SymbolicScalar  # noqa: F401
from .tensor import Tensor, note_operand, wrap


def gather_in_ub(param: Tensor, indices: Tensor, block_table: Tensor, block_size: int, axis: int) -> Tensor:
    """Rows of a paged KV cache: out[i] = param[block_table[t // block_size] * block_size + t % block_size]
    for each token t = indices[0, i]; param [token_num, hidden], indices [1, k], block_table [1, n]."""
    for t in (param, indices, block_table):
        note_operand(t)
    if axis not in (-2, param.dim() - 2) or param.dim() != 2 or indices.dim() != 2 or block_table.dim() != 2:
        violation("C-API-06", f"pypto.experimental.gather_in_ub: needs 2-D param/indices/block_table and axis -2, "
                              f"got ranks {param.dim()}/{indices.dim()}/{block_table.dim()}, axis {axis}")
    tokens = indices.data.reshape(-1).long()
    table = block_table.data.reshape(-1).long()
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) // block_size >= table.numel()):
        violation("C-API-06", f"pypto.experimental.gather_in_ub: token indices [{int(tokens.min())}, "
                              f"{int(tokens.max())}] outside the {table.numel()} blocks of {block_size}")
    rows = table[tokens // block_size] * block_size + tokens % block_size
    if rows.numel() and int(rows.max()) >= param.data.shape[0]:
        violation("C-API-06", f"pypto.experimental.gather_in_ub: block table points at row {int(rows.max())} of "
                              f"param with {param.data.shape[0]} rows")
    return wrap(param.data[rows], param.dtype, [indices._shape[-1], param._shape[-1]])


def _swap_leading(t: Tensor) -> Tensor:
    """(X, Y, ...) -> (Y, X, ...) without a vector op: the fused cube op reads it that way."""
    shape = list(t._shape)
    shape[0], shape[1] = shape[1], shape[0]
    return wrap(t.data.transpose(0, 1).contiguous(), t.dtype, shape)


def transposed_batchmatmul(tensor_a: Tensor, tensor_b: Tensor, out_dtype) -> Tensor:
    """(M, B, K) x (B, K, N) -> (M, B, N): a batched matmul over B with a's first two axes swapped."""
    note_operand(tensor_a)
    return _swap_leading(matmul(_swap_leading(tensor_a), tensor_b, out_dtype))


gather_in_l1 = not_emulatable("experimental.gather_in_l1", "a gather into the cube unit's L1 operand layout "
                                                           "(is_b_matrix/is_trans) whose result pypto 0.2.0 does not "
                                                           "document")
nop = not_emulatable("experimental.nop", NPU_INTERNAL + " (a scheduling node without defined data)")
shmem_store = not_emulatable("experimental.shmem_store", MULTI_DEVICE)
shmem_load = not_emulatable("experimental.shmem_load", MULTI_DEVICE)
