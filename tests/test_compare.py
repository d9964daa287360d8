"""detailed_tensor_compare: tolerance rule, special values, nesting, integers, report, CLI."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

from ptogym.verify import CompareResult, CompositeResult, detailed_tensor_compare as compare

INF, NAN = math.inf, math.nan


def t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


# ------------------------------------------------------------------ tolerance rule
def test_identical_tensors_pass_with_zero_statistics():
    result = compare(t(1.0, -2.0, 3.5), t(1.0, -2.0, 3.5), "y")
    assert isinstance(result, CompareResult)
    assert result.all_close and result["all_close"] and result.shape_match
    assert (result.total_elements, result.out_of_tolerance_count, result.out_of_tolerance_ratio) == (3, 0, 0.0)
    assert (result.max_diff, result.mean_diff, result.std_diff, result.max_rel_diff) == (0.0, 0.0, 0.0, 0.0)
    assert result.outliers == []


def test_tolerance_boundary_is_inclusive_and_relative_to_expected():
    # exactly representable: tolerance = 0 + 2**-10 * 1024 = 1
    assert compare(t(1025.0), t(1024.0), rtol=2**-10, atol=0).all_close
    assert not compare(t(1025.5), t(1024.0), rtol=2**-10, atol=0).all_close
    # rtol scales |expected|, not |actual|: the rule is asymmetric
    assert not compare(t(2.0), t(1.0), rtol=0.6, atol=0).all_close
    assert compare(t(1.0), t(2.0), rtol=0.6, atol=0).all_close
    # atol alone
    assert compare(t(0.25), t(0.0), rtol=0, atol=0.25).all_close
    assert not compare(t(0.5), t(0.0), rtol=0, atol=0.25).all_close


def test_statistics_values():
    result = compare(t(1.0, 2.0, 3.0, 5.0), t(1.0, 2.0, 2.0, 4.0), rtol=0, atol=0.5)
    assert result.out_of_tolerance_count == 2
    assert result.out_of_tolerance_ratio == 0.5
    assert result.max_diff == 1.0
    assert result.mean_diff == 0.5
    assert result.std_diff == pytest.approx(0.5)
    assert result.max_rel_diff == 0.5  # |3 - 2| / 2


def test_default_tolerances_are_1e_3():
    assert compare(t(1.0009), t(1.0)).all_close
    assert not compare(t(1.0025), t(1.0)).all_close


# ------------------------------------------------------------------ special values
@pytest.mark.parametrize("actual, expected", [(NAN, 1.0), (1.0, NAN), (NAN, NAN)])
def test_nan_on_either_side_fails(actual, expected):
    result = compare(t(actual, 0.0), t(expected, 0.0), rtol=1e9, atol=1e9)
    assert not result.all_close
    assert result.out_of_tolerance_count == 1
    assert result.actual_nan_count == int(math.isnan(actual))
    assert result.expected_nan_count == int(math.isnan(expected))
    assert result.outliers[0].index == (0,)


def test_nan_is_left_out_of_statistics():
    result = compare(t(NAN, 3.0), t(1.0, 1.0), rtol=0, atol=0)
    assert result.max_diff == 2.0 and result.mean_diff == 2.0


def test_same_signed_infinities_match():
    result = compare(t(INF, -INF, 1.0), t(INF, -INF, 1.0))
    assert result.all_close
    assert result.actual_inf_count == result.expected_inf_count == 2
    assert result.max_diff == 0.0


@pytest.mark.parametrize("actual, expected", [(INF, -INF), (-INF, INF), (1.0, INF), (INF, 1.0), (3e38, INF)])
def test_opposite_infinities_and_finite_against_inf_fail_even_with_huge_tolerance(actual, expected):
    result = compare(t(actual), t(expected), rtol=1e6, atol=1e6)
    assert not result.all_close
    assert result.max_diff == INF and result.max_rel_diff == INF


def test_empty_tensors_pass():
    result = compare(torch.empty(0, 3), torch.empty(0, 3, dtype=torch.bfloat16))
    assert result.all_close and result.total_elements == 0 and result.out_of_tolerance_ratio == 0.0


def test_shape_mismatch_fails_without_raising():
    result = compare(torch.zeros(2, 3), torch.zeros(3, 2), "y", max_error_ratio=1.0)
    assert not result.all_close and not result.shape_match
    assert (result.actual_shape, result.expected_shape) == ((2, 3), (3, 2))
    assert result.max_diff is None and result.out_of_tolerance_count is None
    assert "shape mismatch" in result.report()


# ------------------------------------------------------------------ error ratio
def test_max_error_ratio_allows_a_share_of_failing_elements():
    expected = torch.zeros(10)
    actual = expected.clone()
    actual[3] = 1.0
    assert not compare(actual, expected).all_close
    assert compare(actual, expected, max_error_ratio=0.1).all_close
    assert not compare(actual, expected, max_error_ratio=0.05).all_close


def test_max_error_ratio_never_excuses_nan():
    expected = torch.zeros(10)
    actual = expected.clone()
    actual[3] = NAN
    result = compare(actual, expected, max_error_ratio=0.5)
    assert result.out_of_tolerance_ratio == 0.1 and not result.all_close


# ------------------------------------------------------------------ integers
def test_integer_outputs_use_int_tolerance():
    actual = t(1, 2, 3, dtype=torch.int8)
    expected = t(2, 2, 5, dtype=torch.int32)
    result = compare(actual, expected, int_tolerance=1)
    assert result.integer_mode
    assert result.out_of_tolerance_count == 1 and not result.all_close
    assert compare(actual, expected, int_tolerance=2).all_close


def test_integer_comparison_ignores_rtol_and_atol():
    result = compare(t(1001, dtype=torch.int32), t(1000, dtype=torch.int32), rtol=0.5, atol=5)
    assert not result.all_close


def test_integer_comparison_is_exact_beyond_float64_precision():
    big = 2**53
    actual = torch.tensor([big + 1], dtype=torch.int64)
    expected = torch.tensor([big], dtype=torch.int64)
    assert float(actual) == float(expected)  # float64 could not tell them apart
    result = compare(actual, expected)
    assert not result.all_close and result.max_diff == 1.0


def test_integer_against_float_uses_float_tolerances():
    result = compare(t(1, dtype=torch.int32), t(1.0004), int_tolerance=0)
    assert not result.integer_mode and result.all_close


def test_bool_outputs_compare_as_integers():
    assert not compare(torch.tensor([True, False]), torch.tensor([True, True])).all_close


# ------------------------------------------------------------------ inputs and dtypes
def test_dtype_mix_is_compared_in_float64():
    expected = torch.linspace(-4, 4, 101)
    result = compare(expected.to(torch.bfloat16), expected, "y", rtol=1e-2, atol=1e-2)
    assert result.all_close
    assert (result.actual_dtype, result.expected_dtype) == ("bfloat16", "float32")
    assert 0 < result.max_diff <= 4 * 2**-8  # bf16 rounding of values up to 4


def test_numpy_arrays_and_python_scalars_are_accepted():
    assert compare(np.array([1.0, 2.0]), torch.tensor([1.0, 2.0])).all_close
    assert compare(np.float16(0.5), 0.5).all_close
    result = compare(3, np.int64(4), int_tolerance=1)
    assert result.integer_mode and result.all_close and result.actual_shape == ()


def test_non_numeric_and_complex_leaves_are_rejected():
    with pytest.raises(TypeError, match=r"out\[0\]"):
        compare(["text"], [torch.zeros(1)], "out")
    with pytest.raises(TypeError, match="complex"):
        compare(torch.zeros(2, dtype=torch.complex64), torch.zeros(2, dtype=torch.complex64))


# ------------------------------------------------------------------ worst elements
# ------------------------------------------------------- issue 9: overflow, dtypes, tolerances
@pytest.mark.parametrize("actual, expected, tolerance, close", [
    ([-2**63], [0], 0, False),                 # |diff| = 2**63 does not fit int64
    ([2**63 - 1], [-2**63], 1, False),         # the difference overflows int64
    ([2**63 - 1], [-2**63], 2**64, True),      # ... and is exactly 2**64 - 1
    ([-2**63], [-2**63], 0, True),
    ([5, -2**63], [4, -2**63 + 1], 1, True),
])
def test_integer_extremes_never_overflow_into_a_verdict(actual, expected, tolerance, close):
    result = compare(torch.tensor(actual), torch.tensor(expected), int_tolerance=tolerance)
    assert result.all_close is close
    true_max = max(abs(a - e) for a, e in zip(actual, expected))
    assert result.max_diff == float(true_max) and result.max_diff >= 0


def test_uint64_beyond_int64_compares_exactly():
    big = torch.tensor([2**64 - 1, 2**63, 7], dtype=torch.uint64)
    assert compare(big, big.clone()).all_close
    result = compare(big, torch.tensor([0, 2**63 - 1, 7], dtype=torch.uint64))
    assert not result.all_close and result.out_of_tolerance_count == 2
    assert result.max_diff == float(2**64 - 1)
    assert compare(torch.tensor([2**63], dtype=torch.uint64), torch.tensor([2**63 - 1]), int_tolerance=1).all_close


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                                   torch.float8_e5m2fnuz])
def test_float8_compares_exactly_widened(dtype):
    values = torch.tensor([1.0, -2.0, 0.5]).to(dtype)
    assert compare(values, values.float()).all_close
    result = compare(values, torch.tensor([1.0, -2.0, 0.75]), rtol=0, atol=0.1)
    assert not result.all_close and result.actual_dtype == str(dtype).removeprefix("torch.")
    assert result.max_diff == 0.25


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor", "ignore:Sparse CSR tensor support")
def test_sparse_and_quantized_compare_by_value():
    dense = torch.tensor([[0.0, 1.5], [2.0, 0.0]])
    assert compare(dense.to_sparse(), dense).all_close and compare(dense, dense.to_sparse_csr()).all_close
    quantized = torch.quantize_per_tensor(dense, 0.5, 0, torch.qint8)
    assert compare(quantized, dense, rtol=0, atol=0).all_close
    assert not compare(quantized, dense + 0.5, rtol=0, atol=0).all_close


@pytest.mark.parametrize("leaf, message", [
    (torch.ones(2, device="meta"), "meta tensor holds no values"),
    (torch.ones(2, dtype=torch.complex64), "complex"),
])
def test_tensors_without_comparable_values_are_refused_clearly(leaf, message):
    with pytest.raises(TypeError, match=message):
        compare(leaf, torch.ones(2))


@pytest.mark.parametrize("option, value", [
    ("rtol", -1), ("rtol", NAN), ("atol", INF), ("atol", "0.1"), ("max_error_ratio", 5),
    ("max_error_ratio", -0.1), ("int_tolerance", -1), ("int_tolerance", 1.5), ("max_outliers", -2),
])
def test_invalid_tolerances_are_refused_naming_the_option(option, value):
    with pytest.raises(ValueError, match=f"^{option}: must be"):
        compare(t(1.0), t(1.0), **{option: value})


def test_outliers_are_the_worst_failing_elements_in_order_with_indices():
    expected = torch.zeros(3, 4)
    actual = expected.clone()
    actual[0, 3] = 5.0
    actual[2, 1] = -7.0
    actual[1, 0] = 2.0
    actual[1, 1] = 1e-4  # within tolerance: never an outlier
    result = compare(actual, expected, rtol=0, atol=1e-3, max_outliers=2)
    assert result.out_of_tolerance_count == 3
    assert [o.index for o in result.outliers] == [(2, 1), (0, 3)]
    worst = result.outliers[0]
    assert (worst.actual, worst.expected, worst.abs_diff, worst.rel_diff) == (-7.0, 0.0, 7.0, INF)
    assert result["outliers"][1]["index"] == (0, 3)


def test_nan_outliers_rank_first_and_only_failures_are_listed():
    actual = t(1.0, NAN, 10.0, 1.0)
    result = compare(actual, t(1.0, 0.0, 0.0, 1.0), rtol=0, atol=0)
    assert [o.index for o in result.outliers] == [(1,), (2,)]


def test_outliers_on_a_large_tensor():
    expected = torch.randn(2048, 7168, generator=torch.Generator().manual_seed(0))
    actual = expected.to(torch.bfloat16)
    actual[1000, 7000] += 3.0
    actual[5, 6] -= 1.0
    start = time.perf_counter()
    result = compare(actual, expected, rtol=1e-2, atol=1e-2)
    assert time.perf_counter() - start < 15  # vectorised; seconds even on a busy 2-core box
    assert result.out_of_tolerance_count == 2
    assert [o.index for o in result.outliers] == [(1000, 7000), (5, 6)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_chunked_comparison_equals_one_pass(monkeypatch, dtype):
    """Large tensors are compared chunk by chunk (bounded memory); chunks of 7 elements
    give the verdict, counts, statistics and outliers of a single pass."""
    import ptogym.verify.compare as compare_module

    g = torch.Generator().manual_seed(3)
    expected = (torch.randn(13, 11, generator=g) * 100).to(dtype)
    actual = expected + (torch.randn(13, 11, generator=g) * 3).to(dtype)
    actual[2, 3], expected[5, 5] = (NAN, 7.0) if dtype.is_floating_point else (actual[2, 3], expected[5, 5])
    one_pass = compare(actual, expected, rtol=0.01, atol=1, max_outliers=5, int_tolerance=2)
    monkeypatch.setattr(compare_module, "CHUNK_ELEMENTS", 7)
    chunked = compare(actual, expected, rtol=0.01, atol=1, max_outliers=5, int_tolerance=2)
    assert chunked.all_close == one_pass.all_close
    assert chunked.out_of_tolerance_count == one_pass.out_of_tolerance_count > 5
    assert [o.index for o in chunked.outliers] == [o.index for o in one_pass.outliers]
    for stat in ("max_diff", "mean_diff", "std_diff", "max_rel_diff"):
        assert getattr(chunked, stat) == pytest.approx(getattr(one_pass, stat), rel=1e-9), stat


# ------------------------------------------------------------------ nesting
def test_nested_outputs_are_compared_leaf_by_leaf_with_paths():
    expected = (torch.ones(2), {"y": torch.zeros(3), "rstd": torch.ones(2, 1)})
    actual = [torch.ones(2), {"y": torch.zeros(3), "rstd": torch.full((2, 1), 2.0)}]
    result = compare(actual, expected, "out")
    assert isinstance(result, CompositeResult)
    assert list(result.leaves) == ["out[0]", "out[1]['y']", "out[1]['rstd']"]
    assert not result.all_close and not result["all_close"]
    assert result["out[1]['y']"].all_close
    rstd = result["out[1]['rstd']"]
    assert not rstd.all_close and rstd.max_diff == 1.0 and rstd.name == "out[1]['rstd']"
    assert result.to_dict()["leaves"]["out[0]"]["all_close"] is True
    assert "out[1]['rstd']: FAIL" in result.report()


@pytest.mark.parametrize("empty", [{}, [], (), {"a": []}, [{}, ()]])
def test_nested_outputs_holding_no_tensor_fail(empty):
    result = compare(empty, empty, "out")
    assert not result.all_close and result.compared_elements == 0
    assert "nothing to compare" in result.report()


def test_nested_outputs_all_close_when_every_leaf_is():
    value = {"a": [torch.ones(2), torch.zeros(1)]}
    assert compare(value, {"a": [torch.ones(2), torch.zeros(1)]}).all_close


@pytest.mark.parametrize("actual, expected, path, fragment", [
    ((torch.ones(1),), (torch.ones(1), torch.ones(1)), "out", "1 items, expected 2"),
    ({"y": torch.ones(1)}, {"y": torch.ones(1), "rstd": torch.ones(1)}, "out", "lacks keys ['rstd']"),
    ({"y": torch.ones(1), "z": torch.ones(1)}, {"y": torch.ones(1)}, "out", "unexpected keys ['z']"),
    ((torch.ones(1), [torch.ones(1)]), (torch.ones(1), {"k": torch.ones(1)}), "out[1]", "a sequence, expected a dict"),
    (torch.ones(1), (torch.ones(1),), "out", "a tensor, expected a sequence"),
])
def test_structure_mismatch_fails_naming_the_path(actual, expected, path, fragment):
    result = compare(actual, expected, "out")
    assert not result.all_close
    assert len(result.structure_errors) == 1
    assert result.structure_errors[0].startswith(f"{path}: actual ")
    assert fragment in result.structure_errors[0]
    assert f"structure mismatch: {path}" in result.report()


# ------------------------------------------------------------------ report
def test_report_text_has_verdict_shapes_stats_and_worst_table():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 0.5
    report = compare(actual.to(torch.bfloat16), expected, "rstd").report()
    lines = report.splitlines()
    assert lines[0] == "rstd: FAIL (rtol=0.001 atol=0.001)"
    assert "[2, 3] bfloat16" in report and "[2, 3] float32" in report
    assert "out of tolerance 1 (16.6667%)" in report
    assert "abs diff max=0.5" in report
    assert "worst 1 elements:" in report
    assert lines[-1].split() == ["[1,", "2]", "0.5", "0", "0.5", "inf"]


def test_report_of_a_pass_has_no_worst_table():
    report = compare(torch.ones(2), torch.ones(2), "y").report()
    assert report.startswith("y: PASS") and "worst" not in report


def test_item_access_reads_the_dict_view():
    result = compare(t(1.0), t(1.5), "y", rtol=0, atol=0)
    assert result["max_diff"] == 0.5 and result["name"] == "y"
    assert result.to_dict()["out_of_tolerance_count"] == 1
    with pytest.raises(KeyError):
        result["no_such_field"]


# ------------------------------------------------------------------ CLI
def test_compare_cli_on_pt_files(tmp_path, ptogym_cli, capsys):
    torch.save(torch.ones(4), tmp_path / "expected.pt")
    torch.save(torch.ones(4, dtype=torch.bfloat16), tmp_path / "same.pt")
    torch.save(torch.full((4,), 1.5), tmp_path / "off.pt")
    assert ptogym_cli(["compare", str(tmp_path / "same.pt"), str(tmp_path / "expected.pt"), "--name", "y"]) == 0
    assert capsys.readouterr().out.startswith("y: PASS")
    assert ptogym_cli(["compare", str(tmp_path / "off.pt"), str(tmp_path / "expected.pt")]) == 1
    assert "output: FAIL" in capsys.readouterr().out
    assert ptogym_cli(["compare", str(tmp_path / "off.pt"), str(tmp_path / "expected.pt"), "--atol", "0.5"]) == 0
    assert ptogym_cli(["compare", str(tmp_path / "off.pt"), str(tmp_path / "expected.pt"),
                       "--max-error-ratio", "1"]) == 0


@pytest.mark.parametrize("saved", [{}, [], {"y": torch.empty(0, 3)}, torch.empty(0)])
def test_compare_cli_fails_when_nothing_is_compared(tmp_path, ptogym_cli, capsys, saved):
    torch.save(saved, tmp_path / "a.pt")
    torch.save(saved, tmp_path / "e.pt")
    assert ptogym_cli(["compare", str(tmp_path / "a.pt"), str(tmp_path / "e.pt")]) == 1
    out = capsys.readouterr().out
    assert "nothing" in out and out.rstrip().endswith("[PRECISION_FAIL]")


def test_compare_cli_on_nested_pt_files(tmp_path, ptogym_cli, capsys):
    torch.save({"y": torch.ones(2), "rstd": torch.ones(1)}, tmp_path / "a.pt")
    torch.save({"y": torch.ones(2), "rstd": torch.zeros(1)}, tmp_path / "e.pt")
    assert ptogym_cli(["compare", str(tmp_path / "a.pt"), str(tmp_path / "e.pt"), "--name", "out"]) == 1
    assert "out['rstd']: FAIL" in capsys.readouterr().out


def test_compare_cli_on_npy_files_with_int_tolerance(tmp_path, ptogym_cli):
    np.save(tmp_path / "a.npy", np.array([1, 2, 3], dtype=np.int8))
    np.save(tmp_path / "e.npy", np.array([2, 2, 3], dtype=np.int8))
    assert ptogym_cli(["compare", str(tmp_path / "a.npy"), str(tmp_path / "e.npy")]) == 1
    assert ptogym_cli(["compare", str(tmp_path / "a.npy"), str(tmp_path / "e.npy"), "--int-tolerance", "1"]) == 0


def test_compare_cli_unreadable_inputs_exit_2(tmp_path, ptogym_cli, capsys):
    np.save(tmp_path / "e.npy", np.zeros(2))
    (tmp_path / "junk.pt").write_bytes(b"not a tensor")
    (tmp_path / "data.csv").write_text("1,2")
    for name in ("missing.npy", "junk.pt", "data.csv"):
        assert ptogym_cli(["compare", str(tmp_path / name), str(tmp_path / "e.npy")]) == 2
        assert name in capsys.readouterr().err


def test_compare_cli_safetensors_needs_the_package(tmp_path, ptogym_cli, capsys):
    try:
        import safetensors  # noqa: F401
    except ImportError:
        (tmp_path / "a.safetensors").write_bytes(b"")
        assert ptogym_cli(["compare", str(tmp_path / "a.safetensors"), str(tmp_path / "a.safetensors")]) == 2
        assert "needs the 'safetensors' package" in capsys.readouterr().err
    else:
        from safetensors.torch import save_file

        save_file({"y": torch.ones(2)}, str(tmp_path / "a.safetensors"))
        assert ptogym_cli(["compare", str(tmp_path / "a.safetensors"), str(tmp_path / "a.safetensors")]) == 0
