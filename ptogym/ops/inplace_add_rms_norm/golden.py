"""Independent reference for InplaceAddRmsNorm: plain torch in fp32."""
import math

import torch


def inplace_add_rms_norm_golden(x1, x2, gamma, eps=1e-6, rows_per_block=4096):
    """Return (y, x_add, rstd) in x1's dtype; inputs are not modified.

    Rows are independent, so they are computed *rows_per_block* at a time: the fp32
    temporaries stay a few tens of MB even for the largest levels (a 32768-row case
    would otherwise hold about 4 GB of them)."""
    hidden = x1.shape[-1]
    rows = math.prod(x1.shape[:-1])
    a, b = x1.reshape(rows, hidden), x2.reshape(rows, hidden)
    y, x_add = torch.empty_like(a), torch.empty_like(a)
    rstd = torch.empty(rows, 1, dtype=x1.dtype, device=x1.device)
    weight = gamma.to(torch.float32)
    for start in range(0, rows, rows_per_block):
        block = slice(start, start + rows_per_block)
        added = a[block].to(torch.float32) + b[block].to(torch.float32)
        inverse = torch.rsqrt(added.pow(2).mean(dim=-1, keepdim=True) + eps)
        y[block], x_add[block], rstd[block] = added * inverse * weight, added, inverse
    return y.view(x1.shape), x_add.view(x1.shape), rstd.view(*x1.shape[:-1], 1)


def self_check(hidden: int = 7168, eps: float = 1e-6, dtype=torch.float32) -> None:
    """The golden's own stability checks: raise AssertionError when one fails."""
    zeros = torch.zeros(2, 3, hidden, dtype=dtype)
    ones = torch.ones(hidden, dtype=dtype)
    y, x_add, rstd = inplace_add_rms_norm_golden(zeros, zeros, ones, eps)
    expected = 1 / math.sqrt(eps)
    assert torch.isfinite(rstd).all() and (rstd > 0).all(), "all-zero input: rstd must be finite and positive"
    assert torch.allclose(rstd.float(), torch.full_like(rstd.float(), expected), rtol=1e-2), \
        f"all-zero input: rstd should be 1/sqrt(eps) = {expected}, got {rstd.flatten()[0].item()}"
    assert (y == 0).all() and (x_add == 0).all(), "all-zero input: y and x_add must be 0"
    y, x_add, rstd = inplace_add_rms_norm_golden(torch.ones(2, 3, hidden, dtype=dtype),
                                                 torch.ones(2, 3, hidden, dtype=dtype), ones, eps)
    assert torch.allclose(x_add.float(), torch.full_like(x_add.float(), 2.0)), "1 + 1 must give x_add = 2"
    assert torch.allclose(rstd.float(), torch.full_like(rstd.float(), 0.5), rtol=1e-3), "1 + 1 must give rstd = 0.5"
    assert torch.allclose(y.float(), torch.ones_like(y.float()), rtol=1e-3), "1 + 1 must give y = 1"
    for name, t in (("y", y), ("x_add", x_add), ("rstd", rstd)):
        assert torch.isfinite(t).all(), f"{name} has NaN/Inf"
