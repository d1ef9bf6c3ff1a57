"""The Python package returns the CLI's values: checked against hand formulas, the JSON
Schemas generated from the Rust types, and pandas reading every CSV output."""

import io
import json

import pytest

import astrolabe

GPT3 = dict(model="gpt3-175b", system="dgx-a100", gpus=1024, tp=8, pp=16, global_batch=1536)


def test_estimate_returns_the_schema_fields():
    r = astrolabe.estimate(**GPT3)
    t = r["iteration_time_s"]
    assert isinstance(t, float) and t > 0
    # tokens/s = global batch x sequence length / iteration time (GPT-3: 2048 tokens).
    assert r["tokens_per_s"] == pytest.approx(1536 * 2048 / t, rel=1e-12)
    # MFU is a fraction; the plan is an object with integer degrees.
    assert 0 < r["mfu"] < 1
    assert r["plan"]["dp"] == 1024 // (8 * 16) and isinstance(r["plan"]["tp"], int)
    assert r["schema_version"] == astrolabe.SCHEMA_VERSION == 1
    assert r["fits"] is True


def test_estimate_matches_the_command_line():
    text, status = astrolabe.run(
        "estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "1024",
        "--tp", "8", "--pp", "16", "--global-batch", "1536", "--format", "json")
    assert status == 0
    assert json.loads(text) == astrolabe.estimate(**GPT3)


def test_outputs_match_their_json_schemas():
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(astrolabe.estimate(**GPT3), astrolabe.schema("estimate"))
    sweep = astrolabe.sweep(model="llama3-8b", system="dgx-h100", gpus=16, global_batch=64,
                            top=3, full=True)
    jsonschema.validate(sweep, astrolabe.schema("sweep"))
    jsonschema.validate(astrolabe.compare("gpu-generations"), astrolabe.schema("compare"))
    coll = json.loads(astrolabe.run("collective", "all-reduce", "--system", "dgx-h100",
                                    "--size", "8..1M", "--format", "json")[0])
    jsonschema.validate(coll, astrolabe.schema("collective"))


def test_input_errors_raise_value_error_with_the_cli_message():
    with pytest.raises(ValueError, match="did you mean 'gpt3-175b'"):
        astrolabe.estimate(model="gpt3-157b", system="dgx-a100")
    with pytest.raises(ValueError, match="--global-batch"):
        astrolabe.estimate(model="gpt3-175b", system="dgx-a100", gpus=64, tp=8, pp=8)
    with pytest.raises(ValueError, match="unexpected argument"):
        astrolabe.estimate(model="gpt3-175b", system="dgx-a100", tensor_parallel=8)


def test_a_plan_that_does_not_fit_is_returned_not_raised():
    r = astrolabe.estimate(model="megatron-gpt-22b", system="dgx-a100", gpus=8, tp=8,
                           micro_batch=4, global_batch=4, flash_attention=False, zero=0)
    assert r["fits"] is False
    assert r["memory_per_device_bytes"] > r["memory_capacity_bytes"]


def test_switches_take_booleans():
    on = astrolabe.estimate(model="llama3-8b", system="dgx-h100", gpus=8, tp=2)
    off = astrolabe.estimate(model="llama3-8b", system="dgx-h100", gpus=8, tp=2,
                             sequence_parallel=False)
    assert on["plan"]["sequence_parallel"] is True
    assert off["plan"]["sequence_parallel"] is False
    assert "sequence_parallel" not in " ".join(off["defaults_used"])


def test_sweep_records_are_ranked():
    rows = astrolabe.sweep(model="llama3-8b", system="dgx-h100", gpus=16, global_batch=64,
                           tp=[1, 2], top=5)
    times = list(rows["iteration_time_s"]) if hasattr(rows, "columns") else [
        r["iteration_time_s"] for r in rows]
    assert len(times) == 5 and times == sorted(times)


def test_collective_rows_follow_nccl_tests():
    rows = astrolabe.collective("all-reduce", system="dgx-h100", nodes=4, b=8, e="1M", f=2)
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    assert [r["size_bytes"] for r in rows] == [float(2 ** k) for k in range(3, 21)]
    for r in rows:
        # nccl-tests: algbw = size / time; busbw = algbw x 2(p-1)/p for all-reduce.
        assert r["nranks"] == 32
        assert r["algbw_bytes_per_s"] == pytest.approx(r["size_bytes"] / r["time_s"])
        assert r["busbw_bytes_per_s"] == pytest.approx(r["algbw_bytes_per_s"] * 2 * 31 / 32)


CSV_OUTPUTS = [
    (["estimate", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "1024", "--tp", "8",
      "--pp", "16", "--global-batch", "1536"], ["summary", "time", "memory"]),
    (["sweep", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "16",
      "--global-batch", "64", "--top", "3"], ["top", "pareto", "drops", "summary"]),
    (["compare", "gpu-generations"], ["variants"]),
    (["collective", "all-gather", "--system", "dgx-a100", "--size", "8..1M"],
     ["rows", "phases"]),
]


@pytest.mark.parametrize("args,tables", CSV_OUTPUTS, ids=lambda a: str(a[0]))
def test_pandas_reads_every_csv_output(args, tables):
    pandas = pytest.importorskip("pandas")
    for table in tables:
        text, status = astrolabe.run(*args, "--format", "csv", "--table", table)
        assert status == 0
        if not text:
            continue
        df = pandas.read_csv(io.StringIO(text))
        assert len(df) >= 1, (args, table)
        assert not any(str(c).startswith("Unnamed") for c in df.columns)


def _python_blocks(path):
    lines, out, block = path.read_text().splitlines(), [], None
    for line in lines:
        if block is None and line.strip() == "```python":
            block = []
        elif block is not None and line.startswith("```"):
            out.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(line)
    return out


@pytest.mark.parametrize("page", ["README.md", "docs/python.md"])
def test_documented_python_examples_run(page):
    pytest.importorskip("pandas")
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    blocks = _python_blocks(root / page)
    assert blocks, page
    for code in blocks:
        exec(compile(code, page, "exec"), {})


def test_every_estimate_and_sweep_row_carries_a_band():
    r = astrolabe.estimate(model="llama3-70b", system="dgx-h100", gpus=64, tp=4, pp=8,
                           virtual_stages=5, global_batch=128)
    b = r["band"]
    assert b["level"] == 0.8 and b["runs"] >= 9 and b["group"].startswith("Hopper dense")
    assert 0 < b["low_s"] < b["high_s"]
