"""``ptogym model qwen3|qwen3-moe``: a Hugging Face model with seeded random weights
against the same model on the gym's operators.

Both generate greedily from the same random prompts; the command prints how many new
tokens agree, and the largest logit difference over the positions where the token
prefixes still agree (the prefill's positions and every decode step's logits).
``[PRECISION_PASS]`` 0 when every token agrees and the logits are within the
tolerance (a share of the reference's largest |logit|: 2^-5 for bf16 compute, 2^-8
for fp16, a few ulps carried through the layers), ``[PRECISION_FAIL]`` 1 otherwise.

``--backend pypto-sim``: the numbers still come from the interpreter (pypto-sim
compiles every launch: minutes per step), and layer 0 of the prefill and of the first
decode step also runs through pypto's cost model: a table of simulated µs per kernel,
their sum and the layer's physical floor (``ptogym/models/estimate.py``).
"""
from __future__ import annotations

import json
import sys
import time

from ptogym.cli import UsageError, check_writable, verdict

RELATIVE_LOGIT_TOLERANCE = {"bfloat16": 2 ** -5, "float16": 2 ** -8}
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _positive(option: str, value: int, minimum: int = 1) -> int:
    if value < minimum:
        raise UsageError(f"{option}: must be >= {minimum}, got {value}")
    return value


def _progress(start: float, message: str) -> None:
    print(f"[{time.perf_counter() - start:6.1f}s] {message}", file=sys.stderr, flush=True)


def _cli(args) -> int:
    import importlib.util

    from ptogym.backends import BackendUnavailable, configure_from_cli, get_backend, names

    if importlib.util.find_spec("transformers") is None:
        raise UsageError("ptogym model needs transformers (the reference models): pip install 'ptogym[models]'")

    from . import hf

    _positive("--prompt-len", args.prompt_len)
    _positive("--new", args.new)
    _positive("--batch", args.batch)
    if args.json:
        check_writable(args.json, "--json")
    if args.backend is not None and args.backend not in names():
        raise UsageError(f"--backend: unknown backend {args.backend!r}; choose one of {', '.join(names())}")
    _positive("--seed", args.seed, 0)
    try:
        fields = hf.config_fields(args.family, args.config)
    except (ValueError, OSError, UnicodeDecodeError) as error:
        raise UsageError(str(error)) from None
    from .qwen3 import config_violations

    try:
        config = hf.make_config(args.family, fields)
    except (TypeError, ValueError, KeyError) as error:
        raise UsageError(f"--config: transformers refuses it: {error}") from None
    if problems := config_violations(config):
        raise UsageError("--config: " + "; ".join(problems))
    if args.prompt_len + args.new > config.max_position_embeddings:
        raise UsageError(f"--prompt-len + --new: {args.prompt_len + args.new} positions > the config's "
                         f"max_position_embeddings {config.max_position_embeddings}")
    configure_from_cli(args)
    simulate = args.backend == "pypto-sim"
    timing = None
    if simulate:
        timing = get_backend("pypto-sim")
        try:
            timing.check_available()
        except BackendUnavailable as error:
            raise UsageError(f"--backend pypto-sim: {error}") from None
    numeric = "interp" if simulate or args.backend is None else args.backend
    report = run(args.family, args.config, config, prompt_len=args.prompt_len, new=args.new, batch=args.batch,
                 dtype=DTYPES[args.dtype], seed=args.seed, backend=get_backend(numeric), timing=timing)
    print(report["summary"])
    if "estimate_text" in report:
        print(report.pop("estimate_text"))
    if args.json:
        from ptogym._io import write_failure, write_text

        try:
            write_text(args.json, json.dumps(report, indent=2))
        except OSError as error:
            print(f"error: --json: {write_failure(args.json, error)}", file=sys.stderr)
            print(verdict(2))
            return 2
        print(f"wrote {args.json}")
    exit_code = 0 if report["passed"] else 1
    print(verdict(exit_code))
    return exit_code


def run(family: str, config_name: str, config, *, prompt_len: int, new: int, batch: int, dtype: str,
        seed: int, backend, timing=None, log=None) -> dict:
    """Build the HF model from ``config`` (``hf.make_config``), generate with both, compare;
    the report as a dict (``summary``: its text)."""
    import torch

    from . import hf
    from .qwen3 import PagedModel

    start = time.perf_counter()
    log = log or (lambda message: _progress(start, message))
    log(f"building {family} '{config_name}' ({config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{dtype}, seed {seed}) with transformers")
    hf_model = hf.build(family, config, dtype=getattr(torch, dtype), seed=seed)
    model = PagedModel(hf_model, backend=backend, timing=timing)
    model.clock.time_layers = {0}
    model.clock.on_timed = lambda record, launch: log(
        f"{timing.name}: layer {record.layer} {record.phase} {record.kernel}: "
        + (f"{launch.simulated_us:.1f} us simulated" if launch is not None and launch.simulated_us is not None
           else f"not simulated ({record.error or 'no timing reported'})"))
    generator = torch.Generator().manual_seed(seed + 1)
    prompts = torch.randint(0, hf_model.config.vocab_size, (batch, prompt_len), generator=generator)
    log(f"HF transformers: greedy generate, {batch} x {prompt_len} prompt tokens + {new} new")
    with torch.no_grad():
        reference = hf_model.generate(prompts, max_new_tokens=new, do_sample=False, output_logits=True,
                                      return_dict_in_generate=True)
        ref_tokens = reference.sequences
        ref_prefill = hf_model(prompts).logits
    ref_steps = torch.stack(reference.logits, 1)
    where = f"{backend.name}" + (" (layer 0 also through pypto-sim's cost model)" if timing is not None else "")
    log(f"ptogym ops on {where}: prefill + {new - 1} decode steps")
    try:
        tokens, steps = model.generate(prompts, new, return_logits=True)
    except KeyboardInterrupt:  # show what the cost model timed so far, then stop as interrupted
        if model.clock.records:
            print(_estimate(model, prompt_len, batch)[1] + "\n(interrupted: the kernels timed so far)", flush=True)
        raise
    prefill = model.prefill(prompts) if timing is None else _prefill_untimed(model, prompts)
    log("comparing")
    new_ours, new_ref = tokens[:, prompt_len:], ref_tokens[:, prompt_len:]
    length = min(new_ours.shape[1], new_ref.shape[1])
    agree = (new_ours[:, :length] == new_ref[:, :length])
    agreeing_prefix = agree.int().cumprod(1)  # step j of sequence b counts while steps < j all agreed
    compared = torch.cat((torch.ones(batch, 1, dtype=torch.int32), agreeing_prefix[:, :-1]), 1).bool()
    step_diff = (steps[:, :length].float() - ref_steps[:, :length].float()).abs().amax(-1)
    prefill_diff = (prefill.float() - ref_prefill.float()).abs().max().item()
    max_diff = max(prefill_diff, step_diff[compared].max().item() if compared.any() else 0.0)
    scale = ref_prefill.float().abs().max().item()
    tolerance = RELATIVE_LOGIT_TOLERANCE[str(model.dtype).removeprefix("torch.")] * scale
    same_length = new_ours.shape[1] == new_ref.shape[1]
    matched = int(agree.sum())
    passed = bool(agree.all()) and same_length and max_diff <= tolerance
    first = [int((~row).nonzero()[0]) if not row.all() else None for row in agree]
    # at a disagreement: how far apart the reference's own logits of its token and ours are
    margins = [None if step is None else float(ref_steps[b, step, new_ref[b, step]].float()
                                               - ref_steps[b, step, new_ours[b, step]].float())
               for b, step in enumerate(first)]
    summary = (f"tokens: {matched}/{agree.numel()} new tokens agree with transformers' generate "
               f"({batch} sequences x {length}" + ("" if same_length else
                                                   f"; lengths differ: {new_ours.shape[1]} vs {new_ref.shape[1]}")
               + ")" + ("" if agree.all() else f"; first disagreement per sequence at step {first}, where "
                        "transformers' own logits of its token and of ours differ by "
                        + ", ".join("-" if m is None else f"{m:.4g}" + (" (a near tie)" if m <= tolerance else "")
                                    for m in margins))
               + f"\nlogits: max |diff| {max_diff:.4g} (prefill {prefill_diff:.4g}) over the agreeing prefix, "
               f"tolerance {tolerance:.4g} = {RELATIVE_LOGIT_TOLERANCE[str(model.dtype).removeprefix('torch.')]:g} x "
               f"max |logit| {scale:.4g} ({str(model.dtype).removeprefix('torch.')} compute)")
    report = {"family": family, "config": config_name, "dtype": dtype,
              "compute_dtype": str(model.dtype).removeprefix("torch."), "seed": seed, "batch": batch,
              "prompt_len": prompt_len, "new": new, "backend": backend.name, "tokens_agree": matched,
              "tokens_total": int(agree.numel()), "first_disagreement": first, "reference_margin": margins, "max_logit_diff": max_diff,
              "prefill_logit_diff": prefill_diff, "logit_tolerance": tolerance, "passed": passed, "summary": summary}
    if timing is not None:
        report["estimate"], report["estimate_text"] = _estimate(model, prompt_len, batch)
    return report


def _estimate(model, prompt_len: int, batch: int) -> tuple[dict, str]:
    """The per-layer table of what the clock timed (prefill of the prompts, first decode step)."""
    from ptogym.atoms.measure import cube_peak_tflops
    from ptogym.backends._pypto_runtime import platform_model

    from . import estimate

    platform = platform_model()
    peak = cube_peak_tflops(platform)
    lengths = {"prefill": [(prompt_len, prompt_len)] * batch, "decode": [(1, prompt_len + 1)] * batch}
    figures = estimate.step_figures(model, model.clock.records, lengths)
    result = estimate.table(model.clock.records, figures, platform, peak)
    return result, estimate.format_table(result, platform, peak)


def _prefill_untimed(model, prompts):
    """The prefill logits again, without timing a second prefill (the clock times a phase once)."""
    time_layers, model.clock.time_layers = model.clock.time_layers, set()
    try:
        return model.prefill(prompts)
    finally:
        model.clock.time_layers = time_layers


def add_cli(subparsers) -> None:
    from .hf import FAMILIES, PRESETS

    presets = "; ".join(f"{family}: {', '.join(PRESETS[family])}" for family in FAMILIES)
    parser = subparsers.add_parser("model", help="a whole Qwen3 / Qwen3-MoE on the gym's kernels against transformers",
                                   description="A Hugging Face model with seeded random weights against the same model on the gym's operators.")
    parser.add_argument("family", choices=FAMILIES, help="the architecture")
    parser.add_argument("--config", default="tiny",
                        help=f"a preset ({presets}; the real-dimension presets have one layer), a JSON object or "
                             "a JSON file of config fields over the tiny preset")
    parser.add_argument("--prompt-len", type=int, default=8, help="prompt tokens per sequence (default 8)")
    parser.add_argument("--new", type=int, default=16, help="new tokens to generate (default 16)")
    parser.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    parser.add_argument("--backend", help="where the kernels run: interp (default), pypto-sim (numbers on the "
                                          "interpreter, layer 0 timed by the cost model) or npu")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16",
                        help="the HF model's dtype (default bf16; fp32 models compute in fp16)")
    parser.add_argument("--seed", type=int, default=0, help="weights and prompt seed (default 0)")
    parser.add_argument("--json", help="write the report as JSON")
    from ptogym.backends import add_cli_options

    add_cli_options(parser)
    parser.set_defaults(func=_cli)
