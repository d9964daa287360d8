"""The interpreter against the tight torch a user would write for the same operator,
measured side by side in one process.

    python benchmarks/bench_tight_torch.py [--ops OP ...] [--tokens T ...] [--repeat 7] [--threads 1]

Tight torch: ``F.rms_norm``, and each projection the faster way on this machine (probed
at start and printed): bf16 ``F.linear`` / ``@`` where the CPU multiplies bf16 fast, else
fp32 weights converted once ahead of the timing (as a model does at load time) and
the product rounded to bf16; int8 products with ``torch._int_mm`` or, where that is
slower, exactly in fp32 (|dot| < 2^24) on weights converted ahead.  Each operator runs on the model shapes of its case levels (the case with the
token count, or the nearest larger one sliced to it), with the same inputs for both;
runs alternate (interp, torch, interp, ...) after one warm-up each and the medians are
compared, so a load change on the machine hits both (the ratio of the fastest runs is
printed beside it: on a loaded machine, short runs' medians carry scheduling noise).
Both sides run on ``--threads`` torch threads (default 1: on a shared machine, OpenMP
threads waiting for a busy core make every op erratic).  Goals (issue 26): the interpreter
within 3x at T = 1-16 and within 1.5x at T >= 128.  Each line also gives the largest
difference between the two outputs in bf16 ulps of the golden (the tight versions match
the fp32 goldens to about 1 ulp).
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F  # noqa: N812

from ptogym.backends import get_backend
from ptogym.ops import get_op
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs

QMAX = 127.0


def _faster(first, second) -> bool:
    """Whether ``first()`` beats ``second()`` (best of three each)."""
    def best(fn):
        fn()
        return min(_timed(fn) for _ in range(3))
    return best(first) < best(second)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


_a16, _b16 = torch.randn(16, 4096).bfloat16(), torch.randn(4096, 4096).bfloat16()
_b32 = _b16.float()
BF16_NATIVE = _faster(lambda: _a16 @ _b16, lambda: (_a16.float() @ _b32).bfloat16())
_a8, _b8 = torch.randint(-128, 128, (16, 4096), dtype=torch.int8), torch.randint(-128, 128, (4096, 4096), dtype=torch.int8)
_b8f = _b8.float()
INT_MM_NATIVE = _faster(lambda: torch._int_mm(_a8, _b8), lambda: (_a8.float() @ _b8f).to(torch.int32))
del _a16, _b16, _b32, _a8, _b8, _b8f


def _project(x, w):
    """x @ w (w [K, N] as prepared by ``_ready``), bf16 out."""
    return x @ w if BF16_NATIVE else (x.float() @ w).to(x.dtype)


def _int_product(x_int8, w):
    """The exact int32 product of int8 x [M, K] and w [K, N] (as prepared by ``_ready_int8``)."""
    return torch._int_mm(x_int8, w) if INT_MM_NATIVE else (x_int8.float() @ w).to(torch.int32)


def _ready(w):
    return w if BF16_NATIVE else w.float()


def _ready_int8(w):
    return w.contiguous() if INT_MM_NATIVE else w.float()


def _rms(x, gamma, eps):
    return F.rms_norm(x, (x.shape[-1],), gamma, eps)


def _quant(x32):
    """Per-token symmetric int8 of fp32 rows: (int8 values, dequant scale amax / 127)."""
    amax = x32.abs().amax(-1, keepdim=True).clamp_min(1e-30)
    return torch.round(x32 * (QMAX / amax)).clamp(-128, 127).to(torch.int8), amax / QMAX


def _rope(x, cos, sin, layout):
    """The last ``cos.shape[-1]`` elements of every head rotated, fp32 inside, x's dtype out."""
    rope_dim = cos.shape[-1]
    part = x[..., -rope_dim:].float()
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (rope_dim,)
    cos, sin = cos.float().reshape(shape), sin.float().reshape(shape)
    if layout == "half":
        rotated = torch.cat((-part[..., rope_dim // 2:], part[..., :rope_dim // 2]), -1)
    else:
        pairs = part.unflatten(-1, (-1, 2))
        rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)
    return torch.cat((x[..., :-rope_dim], (part * cos + rotated * sin).to(x.dtype)), -1)


def tight_linear(t, prepared):
    return {"y": _project(t["x"], prepared["weight_t"])}


def tight_rms_norm_linear(t, prepared):
    return {"y": _project(_rms(t["x"], t["gamma"], 1e-6), prepared["weight_t"])}


def tight_rms_norm_linear_quant(t, prepared):
    x_int8, x_scale = _quant(_rms(t["x"].float(), prepared["gamma32"], 1e-6))
    acc = _int_product(x_int8, prepared["weight_t"])
    return {"y": (acc.float() * x_scale * prepared["w_scale32"]).to(torch.bfloat16)}


def tight_mla_prolog(t, prepared):
    tokens, head_dim = t["x"].shape[0], t["gamma_ckv"].shape[0]
    qr = _rms(_project(t["x"], prepared["wq_a"]), t["gamma_cq"], 1e-6)
    q = _rms(_project(qr, prepared["wq_b"]).view(tokens, -1, head_dim), None, 1e-6)
    kv = _rms(_project(t["x"], prepared["wkv"]), t["gamma_ckv"], 1e-6)
    return {"q": _rope(q, t["cos"], t["sin"], "interleave"), "kv": _rope(kv, t["cos"], t["sin"], "interleave"), "qr": qr}


def tight_mla_prolog_quant(t, prepared):
    tokens, head_dim = t["x"].shape[0], t["gamma_ckv"].shape[0]
    x32 = t["x"].float()
    qr, qr_scale = _quant(_rms(x32 @ prepared["wq_a32"], prepared["gamma_cq32"], 1e-6))
    q_b = _int_product(qr, prepared["wq_b"]).float() * qr_scale * prepared["wq_b_scale_row"]
    q = _rms(q_b.view(tokens, -1, head_dim), None, 1e-6).to(t["x"].dtype)
    kv = _rms(x32 @ prepared["wkv32"], prepared["gamma_ckv32"], 1e-6).to(t["x"].dtype)
    return {"q": _rope(q, t["cos"], t["sin"], "interleave"), "kv": _rope(kv, t["cos"], t["sin"], "interleave"),
            "qr": qr, "qr_scale": qr_scale}


def tight_qwen3_pre_attn(t, prepared):
    tokens, head_dim, kv_heads = t["hidden"].shape[0], t["q_norm_gamma"].shape[0], t["k_cache"].shape[1]
    residual = t["residual"].add_(t["hidden"])
    qkv = _project(_rms(residual, t["input_gamma"], 1e-6), prepared["w_qkv_t"])
    q, k, v = qkv.split([qkv.shape[-1] - 2 * kv_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], -1)
    q = _rope(_rms(q.view(tokens, -1, head_dim), t["q_norm_gamma"], 1e-6), t["cos"], t["sin"], "half")
    k = _rope(_rms(k.view(tokens, kv_heads, head_dim), t["k_norm_gamma"], 1e-6), t["cos"], t["sin"], "half")
    slots = t["slot_mapping"].long()
    t["k_cache"].index_copy_(0, slots, k)
    t["v_cache"].index_copy_(0, slots, v.reshape(tokens, kv_heads, head_dim))
    return {"q": q, "residual": residual, "k_cache": t["k_cache"], "v_cache": t["v_cache"]}


def _prepare(op, t):
    """What a model holds ready at load time: its weights in the form the projections take."""
    if op in ("linear", "rms_norm_linear"):
        return {"weight_t": _ready(t["weight"].t())}
    if op == "rms_norm_linear_quant":
        return {"gamma32": t["gamma"].float(), "weight_t": _ready_int8(t["weight"].t()),
                "w_scale32": t["w_scale"].float().reshape(1, -1)}
    if op == "mla_prolog":
        return {name: _ready(t[name]) for name in ("wq_a", "wq_b", "wkv")}
    if op == "mla_prolog_quant":
        return {"wq_a32": t["wq_a"].float(), "wkv32": t["wkv"].float(), "gamma_cq32": t["gamma_cq"].float(),
                "gamma_ckv32": t["gamma_ckv"].float(), "wq_b_scale_row": t["wq_b_scale"].float().reshape(1, -1),
                "wq_b": _ready_int8(t["wq_b"])}
    return {"w_qkv_t": _ready(t["w_qkv"].t())}


TIGHT = {"linear": tight_linear, "rms_norm_linear": tight_rms_norm_linear,
         "rms_norm_linear_quant": tight_rms_norm_linear_quant, "mla_prolog": tight_mla_prolog,
         "mla_prolog_quant": tight_mla_prolog_quant, "qwen3_pre_attn": tight_qwen3_pre_attn}
# the levels with model shapes, by token count
LEVELS = {"linear": {1: "mla_q_a_t1", 16: "qwen3_qkv_t16", 128: "mla_kv_t128", 1024: "mla_kv_t1024"},
          "rms_norm_linear": {1: "level4", 16: "qwen3_t16", 128: "mla_kv_t128", 1024: "qwen3_t1024"},
          "rms_norm_linear_quant": {1: "level4", 16: "qwen3_t16", 128: "mla_kv_t128", 1024: "qwen3_t1024"},
          "mla_prolog": {1: "level7", 16: "level4", 128: "level5", 1024: "level6"},
          "mla_prolog_quant": {1: "level7", 16: "level4", 128: "level5", 1024: "level6"},
          "qwen3_pre_attn": {1: "level4", 16: "level4", 128: "level5", 1024: "level6"}}
TOKEN_INPUTS = {"hidden", "residual", "cos", "sin", "slot_mapping", "x"}


def case_inputs(op, tokens):
    spec = get_op(op)
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == LEVELS[op][tokens])
    inputs = make_case_inputs(spec, case)
    return spec, case, {name: t[:tokens].clone() if name in TOKEN_INPUTS else t for name, t in inputs.items()}


def ulps(actual, expected):
    """Largest |actual - expected| in bf16 ulps of the expected element, its magnitude
    floored at 1 % of the tensor's largest (cancellation leaves a few near zero);
    integers: the plain difference."""
    if not actual.dtype.is_floating_point:
        return (actual.long() - expected.long()).abs().max().item()
    magnitude = expected.float().abs()
    spacing = torch.finfo(torch.bfloat16).eps * magnitude.clamp_min(0.01 * magnitude.max().item() + 1e-30)
    return ((actual.float() - expected.float()).abs() / spacing).max().item()


def measure(op, tokens, repeat):
    spec, case, inputs = case_inputs(op, tokens)
    interp = get_backend("interp")
    state = {name: t.clone() for name, t in inputs.items()}  # in-place operators write into their inputs
    prepared = _prepare(op, state)
    run_interp = lambda: spec.run(state, case.attrs, interp)[0]  # noqa: E731
    run_tight = lambda: TIGHT[op](state, prepared)  # noqa: E731
    golden = spec.golden({name: t.clone() for name, t in inputs.items()}, case.attrs)
    fresh = {name: t.clone() for name, t in inputs.items()}
    agree = max(ulps(value, golden[name]) for name, value in TIGHT[op](fresh, _prepare(op, fresh)).items())
    run_interp(), run_tight()  # warm-up (and the interpreter's fp32 images of the weights)
    times = {"interp": [], "torch": []}
    for _ in range(repeat):
        for name, fn in (("interp", run_interp), ("torch", run_tight)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    interp_s, torch_s = statistics.median(times["interp"]), statistics.median(times["torch"])
    return interp_s, torch_s, min(times["interp"]) / min(times["torch"]), agree


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", default=list(TIGHT), choices=list(TIGHT))
    parser.add_argument("--tokens", nargs="+", type=int, default=[1, 16, 128, 1024], choices=[1, 16, 128, 1024])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"interp vs tight torch, medians of {args.repeat} alternating runs, torch threads={torch.get_num_threads()}; "
          f"projections {'bf16' if BF16_NATIVE else 'fp32 on weights converted ahead'}, int8 products "
          f"{'torch._int_mm' if INT_MM_NATIVE else 'exact fp32 on weights converted ahead'} (the faster here)")
    ratios = {}
    for op in args.ops:
        for tokens in args.tokens:
            interp_s, torch_s, best_ratio, agree = measure(op, tokens, args.repeat)
            ratio = interp_s / torch_s
            goal = 3.0 if tokens <= 16 else 1.5
            ratios[(op, tokens)] = ratio
            print(f"{op:<22} T={tokens:<5} interp {interp_s * 1e3:9.2f} ms  torch {torch_s * 1e3:9.2f} ms  "
                  f"ratio {ratio:5.2f}x (goal <= {goal}x: {'met' if ratio <= goal else 'MISSED'}; best runs "
                  f"{best_ratio:.2f}x)  "
                  f"tight vs golden {agree:.2f} ulp", flush=True)
    return ratios


if __name__ == "__main__":
    main()
