"""Independent reference for InplaceAddRmsNorm: plain torch in fp32."""
import math

import torch


def inplace_add_rms_norm_golden(x1, x2, gamma, eps=1e-6):
    """Return (y, x_add, rstd) in x1's dtype; inputs are not modified."""
    x_add = x1.to(torch.float32) + x2.to(torch.float32)
    mean_square = x_add.pow(2).mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(mean_square + eps)
    y = x_add * rstd * gamma.to(torch.float32)
    return y.to(x1.dtype), x_add.to(x1.dtype), rstd.to(x1.dtype)


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
