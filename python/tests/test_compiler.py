# SPDX-License-Identifier: Apache-2.0
# The compiler API (MIGraphX names) on the bundled model, compared with the `kiln run` CLI.
import json
import os
import threading

import numpy as np
import pytest
import torch

import kiln
from conftest import DIGIT, MODEL, run_checked


@pytest.fixture(scope="module")
def digit():
    return np.load(DIGIT)


def targets():
    return [t for t in ("ref", "cpu") if t in kiln.target_names()]


def cli_outputs(kiln_cli, tmp_path, target, inputs):
    out = tmp_path / f"cli_{target}"
    args = [kiln_cli, "run", MODEL, "--target", target, "--output-dir", str(out)]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    run_checked(args)
    listing = json.loads((out / "outputs.json").read_text())
    return [np.load(out / o["file"]) for o in listing["outputs"]]


@pytest.mark.parametrize("target", targets())
def test_run_matches_cli(kiln_cli, tmp_path, digit, target):
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    prog.compile(kiln.get_target(target))
    assert prog.is_compiled()
    result = prog.run({"image": digit})
    assert len(result) == 1
    ours = np.asarray(result[0])
    expected = cli_outputs(kiln_cli, tmp_path, target, {"image": DIGIT})[0]
    assert ours.shape == (1, 10) and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, expected)
    assert abs(float(ours.sum()) - 1.0) < 1e-5  # softmax


def test_batch_matches_cli(kiln_cli, tmp_path):
    batch = np.random.default_rng(3).random((4, 1, 28, 28), dtype=np.float32)
    np.save(tmp_path / "batch.npy", batch)
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [4, 1, 28, 28]})
    prog.compile(kiln.get_target("ref"))
    ours = np.asarray(prog.run({"image": batch})[0])
    expected = cli_outputs(kiln_cli, tmp_path, "ref", {"image": tmp_path / "batch.npy"})[0]
    np.testing.assert_array_equal(ours, expected)


def test_parse_onnx_buffer_equals_file(digit):
    with open(MODEL, "rb") as f:
        prog = kiln.parse_onnx_buffer(f.read(), map_input_dims={"image": [1, 1, 28, 28]})
    prog.compile(kiln.get_target("ref"))
    from_file = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    from_file.compile(kiln.get_target("ref"))
    np.testing.assert_array_equal(np.asarray(prog.run({"image": digit})[0]),
                                  np.asarray(from_file.run({"image": digit})[0]))


def test_parameter_and_output_shapes():
    prog = kiln.parse_onnx(MODEL)
    assert prog.get_parameter_names() == ["image"]
    s = prog.get_parameter_shapes()["image"]
    assert s.type_string() == "float_type" and s.lens() == [-1, 1, 28, 28] and s.dynamic()
    assert s.ndim() == 4 and s.type_size() == 4 and s.elements() == -1
    fixed = kiln.parse_onnx(MODEL, default_dim_value=2)
    s = fixed.get_parameter_shapes()["image"]
    assert s.lens() == [2, 1, 28, 28] and not s.dynamic() and s.elements() == 2 * 28 * 28
    assert s.bytes() == 2 * 28 * 28 * 4 and s.strides() == [784, 784, 28, 1]
    out = fixed.get_output_shapes()
    assert len(out) == 1 and out[0].lens() == [2, 10]
    assert fixed.get_output_names() == ["probabilities"]
    assert s == kiln.shape(type="float_type", lens=[2, 1, 28, 28])
    assert s != kiln.shape(type="int64_type", lens=[2, 1, 28, 28])
    assert "float_type" in str(s)


def test_print_shows_the_graph(capsys):
    prog = kiln.parse_onnx(MODEL)
    prog.print()
    text = capsys.readouterr().out
    for node in ("conv1", "pool2", "fc", "softmax"):
        assert node in text
    assert str(prog) == text


def test_arguments_share_memory_with_numpy_and_torch(digit):
    a = kiln.argument(digit)
    assert a.data_ptr() == digit.ctypes.data  # wrapped, not copied
    assert a.get_shape().lens() == [1, 1, 28, 28]
    view = np.asarray(a)
    assert view.ctypes.data == digit.ctypes.data
    t = torch.from_dlpack(a)
    assert t.data_ptr() == digit.ctypes.data and t.shape == (1, 1, 28, 28)
    n = np.from_dlpack(a)
    assert n.ctypes.data == digit.ctypes.data
    assert np.array(a).tolist() == digit.tolist() and a.tolist() == digit.tolist()
    # a strided view is copied to a contiguous tensor
    strided = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]
    assert np.asarray(kiln.argument(strided)).tolist() == strided.tolist()
    half = kiln.argument(np.ones((2, 3), np.float16))
    assert np.asarray(half).dtype == np.float16


def test_outputs_are_arguments_viewed_without_copy(digit):
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    prog.compile(kiln.get_target("ref"))
    out = prog.run({"image": kiln.argument(digit)})[0]
    assert isinstance(out, kiln.argument)
    assert np.asarray(out).ctypes.data == out.data_ptr()
    assert torch.from_dlpack(out).data_ptr() == out.data_ptr()
    assert int(np.argmax(out)) == int(np.argmax(np.asarray(out)))
    assert out.get_shape().lens() == [1, 10]


def test_torch_tensors_are_accepted(digit):
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    prog.compile(kiln.get_target("ref"))
    a = np.asarray(prog.run({"image": torch.from_numpy(digit)})[0])
    b = np.asarray(prog.run({"image": digit})[0])
    np.testing.assert_array_equal(a, b)


def test_runs_from_several_threads(digit):
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    prog.compile(kiln.get_target("ref"))
    expected = np.asarray(prog.run({"image": digit})[0]).copy()
    rng = np.random.default_rng(1)
    inputs = [rng.random((1, 1, 28, 28), dtype=np.float32) for _ in range(4)]
    serial = [np.asarray(prog.run({"image": x})[0]).copy() for x in inputs]
    results = [None] * 4

    def work(i):
        for _ in range(5):
            results[i] = np.asarray(prog.run({"image": inputs[i]})[0]).copy()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, serial):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(prog.run({"image": digit})[0]), expected)


def test_gil_is_released_during_run():
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [64, 1, 28, 28]})
    prog.compile(kiln.get_target("ref"))
    x = np.random.default_rng(0).random((64, 1, 28, 28), dtype=np.float32)
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        before = ticks[0]
        prog.run({"image": x})
        during = ticks[0] - before
    finally:
        stop.set()
        t.join()
    # While run() holds no GIL the counting thread runs freely.
    assert during > 1000


def test_generate_and_fill_argument():
    s = kiln.shape(type="float_type", lens=[2, 3])
    a = np.asarray(kiln.generate_argument(s, 7))
    b = np.asarray(kiln.generate_argument(s, 7))
    assert a.shape == (2, 3) and a.dtype == np.float32 and (a == b).all()
    assert (0 <= a).all() and (a < 1).all()
    f = np.asarray(kiln.fill_argument(kiln.shape(type="int32_type", lens=[4]), 5))
    assert f.tolist() == [5, 5, 5, 5] and f.dtype == np.int32


def test_errors_carry_kilns_message(tmp_path, digit):
    with pytest.raises(kiln.KilnError) as e:
        kiln.parse_onnx(str(tmp_path / "missing.onnx"))
    assert "missing.onnx" in str(e.value) and e.value.code == "NOT_FOUND"
    assert isinstance(e.value, RuntimeError)

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf")
    with pytest.raises(kiln.KilnError, match="bad.onnx"):
        kiln.parse_onnx(str(bad))

    with pytest.raises(kiln.KilnError, match="unknown target \"tpu\""):
        kiln.get_target("tpu")

    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    with pytest.raises(kiln.KilnError, match="not compiled"):
        prog.run({"image": digit})
    prog.compile(kiln.get_target("ref"))
    with pytest.raises(kiln.KilnError, match="already compiled"):
        prog.compile(kiln.get_target("ref"))
    with pytest.raises(kiln.KilnError, match="input \"image\" is missing"):
        prog.run({})
    with pytest.raises(kiln.KilnError, match="no input \"img\""):
        prog.run({"image": digit, "img": digit})
    with pytest.raises(kiln.KilnError, match="image") as e:
        prog.run({"image": digit.astype(np.float64)})
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(kiln.KilnError, match="image"):
        prog.run({"image": np.zeros((1, 1, 27, 28), np.float32)})
    with pytest.raises(kiln.KilnError, match="numpy dtype"):
        prog.run({"image": np.array([["a"]])})
    with pytest.raises(kiln.KilnError, match="unknown type"):
        kiln.shape(type="complex_type", lens=[1])
    with pytest.raises(kiln.KilnError, match="numpy dtype object"):
        kiln.argument(object())
    with pytest.raises(kiln.KilnError, match="numpy dtype complex"):
        kiln.argument(np.zeros(2, np.complex64))
    empty = kiln.argument(np.zeros((0, 3), np.float32))
    assert empty.get_shape().lens() == [0, 3] and np.asarray(empty).shape == (0, 3)
    with pytest.raises(kiln.KilnError, match="dynamic dims"):
        kiln.generate_argument(kiln.parse_onnx(MODEL).get_parameter_shapes()["image"])


def test_narrow_types_come_out_as_float32_or_int8():
    # Cast to float8 e4m3fn (ONNX element type 17) and int4 (22): numpy has neither type.
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["f8"], to=17),
         helper.make_node("Cast", ["x"], ["i4"], to=22)], "narrow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("f8", 17, [4]), helper.make_tensor_value_info("i4", 22, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    prog = kiln.parse_onnx_buffer(model.SerializeToString())
    assert [s.type() for s in prog.get_output_shapes()] == ["fp8e4m3fn_type", "int4_type"]
    with pytest.raises(kiln.KilnError, match="numpy has no f8e4m3fn type"):
        prog.get_output_shapes()[0].dtype()
    prog.compile(kiln.get_target("ref"))
    f8, i4 = prog.run({"x": np.array([0.47892547, 1000, -9, np.nan], np.float32)})
    a = np.asarray(f8)
    assert a.dtype == np.float32 and a[:3].tolist() == [0.46875, 448.0, -9.0] and np.isnan(a[3])
    b = np.asarray(i4)  # truncated, then the low four bits
    assert b.dtype == np.int8 and b.tolist() == [0, -8, 7, 0]
    assert i4.tolist() == [0, -8, 7, 0]


@pytest.mark.parametrize("target", targets())
def test_save_and_load_round_trip(tmp_path, digit, target):
    prog = kiln.parse_onnx(MODEL, map_input_dims={"image": [1, 1, 28, 28]})
    with pytest.raises(kiln.KilnError, match="not compiled"):
        kiln.save(prog, tmp_path / "early.kiln")
    prog.compile(kiln.get_target(target))
    expected = np.asarray(prog.run({"image": digit})[0]).copy()
    path = tmp_path / "tiny_cnn.kiln"
    kiln.save(prog, path)
    loaded = kiln.load(path)
    assert loaded.is_compiled() and loaded.target_name() == target
    assert loaded.get_parameter_names() == ["image"]
    np.testing.assert_array_equal(np.asarray(loaded.run({"image": digit})[0]), expected)
    from_bytes = kiln.load_buffer(kiln.save_buffer(prog))
    np.testing.assert_array_equal(np.asarray(from_bytes.run({"image": digit})[0]), expected)
    corrupt = bytearray(path.read_bytes())
    corrupt[len(corrupt) // 2] ^= 0xFF
    (tmp_path / "corrupt.kiln").write_bytes(bytes(corrupt))
    with pytest.raises(kiln.KilnError, match="corrupt.kiln"):
        kiln.load(tmp_path / "corrupt.kiln")
    with pytest.raises(kiln.KilnError):
        kiln.load_buffer(b"not an artifact")


def test_gpu_is_migraphx_name_for_cuda():
    if "cuda" in kiln.target_names():
        assert kiln.get_target("gpu").name() == "cuda"
    else:
        with pytest.raises(kiln.KilnError, match="cuda"):
            kiln.get_target("gpu")
    assert kiln.get_target("ref").name() == "ref"
    ops = kiln.get_onnx_operators()
    assert {"Conv", "Gemm", "MaxPool", "Softmax"} <= set(ops) and ops == sorted(ops)
    assert os.path.basename(kiln._kiln.__file__).startswith("_kiln")


def test_compile_onnx_uses_the_compile_cache(tmp_path, digit):
    # A read-only copy of the model: the cache writes only into cache_dir.
    models = tmp_path / "models"
    models.mkdir()
    model = models / "tiny_cnn.onnx"
    model.write_bytes(open(MODEL, "rb").read())
    models.chmod(0o555)
    cache = tmp_path / "cache"
    dims = {"image": [1, 1, 28, 28]}
    first = kiln.compile_onnx(model, "ref", map_input_dims=dims, cache_dir=cache)
    assert first.is_compiled() and first.target_name() == "ref"
    files = sorted(cache.iterdir())
    assert [f.suffix for f in files] == [".kiln"]
    assert files[0].name.startswith("tiny_cnn.onnx-ref-")
    written = files[0].stat().st_mtime_ns
    expected = np.asarray(first.run({"image": digit})[0])

    again = kiln.compile_onnx(model, "ref", map_input_dims=dims, cache_dir=cache)
    np.testing.assert_array_equal(np.asarray(again.run({"image": digit})[0]), expected)
    assert files[0].stat().st_mtime_ns == written  # loaded, not compiled again
    assert sorted(os.listdir(models)) == ["tiny_cnn.onnx"]

    # Another batch is another key; cache=False writes nothing.
    kiln.compile_onnx(model, "ref", map_input_dims={"image": [2, 1, 28, 28]}, cache_dir=cache)
    assert len(os.listdir(cache)) == 2
    kiln.compile_onnx(model, "ref", map_input_dims={"image": [3, 1, 28, 28]}, cache=False,
                      cache_dir=cache)
    assert len(os.listdir(cache)) == 2
    # It saves as a parsed-and-compiled program does.
    kiln.save(again, tmp_path / "again.kiln")
    loaded = kiln.load(tmp_path / "again.kiln")
    np.testing.assert_array_equal(np.asarray(loaded.run({"image": digit})[0]), expected)

    with pytest.raises(kiln.KilnError, match="absent.onnx"):
        kiln.compile_onnx(tmp_path / "absent.onnx", "ref", cache_dir=cache)


def test_an_unknown_kiln_log_level_is_a_warning_at_import():
    # The CLI refuses such a KILN_LOG_LEVEL; the package says so instead of falling back quietly.
    import subprocess
    import sys
    env = dict(os.environ, KILN_LOG_LEVEL="loud")
    result = subprocess.run([sys.executable, "-c", "import kiln"], env=env, capture_output=True,
                            text=True, check=True)
    assert 'RuntimeWarning: KILN_LOG_LEVEL=loud: unknown log level "loud"' in result.stderr
    env["KILN_LOG_LEVEL"] = "warn"
    quiet = subprocess.run([sys.executable, "-c", "import kiln"], env=env, capture_output=True,
                           text=True, check=True)
    assert "KILN_LOG_LEVEL" not in quiet.stderr
