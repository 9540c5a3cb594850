# SPDX-License-Identifier: Apache-2.0
# kiln.quantize_fp16 / quantize_bf16 / quantize_int8 (MIGraphX's signatures) on the trained digit
# classifier and its held-out digit images: outputs, top-1 agreement, artifacts, errors.
import os

import numpy as np
import pytest

import kiln
from conftest import ROOT

DIGITS_MODEL = os.path.join(ROOT, "examples", "repository", "digits", "1", "model.onnx")
DIGIT_IMAGES = os.path.join(ROOT, "examples", "digit_images")


def targets():
    return [t for t in ("ref", "cpu") if t in kiln.target_names()]


@pytest.fixture(scope="module")
def digits():
    """The 16 held-out digits as a [16, 1, 8, 8] float32 batch (grey level / 16) and labels."""
    images, labels = [], []
    with open(os.path.join(DIGIT_IMAGES, "labels.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, label = line.split()
            with open(os.path.join(DIGIT_IMAGES, name), "rb") as img:
                data = img.read()
            assert data.startswith(b"P5\n8 8\n16\n")
            images.append(np.frombuffer(data[-64:], np.uint8).reshape(1, 8, 8))
            labels.append(int(label))
    return np.stack(images).astype(np.float32) / 16.0, np.array(labels)


def logits(prog, target, batch):
    prog.compile(kiln.get_target(target))
    return np.asarray(prog.run({"image": batch})[0]).copy()


@pytest.mark.parametrize("target", targets())
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_float_precision_keeps_predictions(digits, target, precision):
    batch, labels = digits
    want = logits(kiln.parse_onnx(DIGITS_MODEL), target, batch)
    prog = kiln.parse_onnx(DIGITS_MODEL)
    getattr(kiln, f"quantize_{precision}")(prog)
    text = str(prog)
    assert {"fp16": "f16[", "bf16": "bf16["}[precision] in text and "Cast" in text
    got = logits(prog, target, batch)
    assert got.dtype == np.float32  # the signature stays fp32
    tolerance = 0.05 if precision == "fp16" else 0.3
    np.testing.assert_allclose(got, want, atol=tolerance)
    assert not np.array_equal(got, want)
    assert (got.argmax(1) == want.argmax(1)).all()


def test_float_precision_op_list():
    prog = kiln.parse_onnx(DIGITS_MODEL)
    kiln.quantize_bf16(prog, ins_names=["convolution"])
    text = str(prog)
    assert "bf16[" in text
    assert "Gemm" in text and "bf16[batch,10]" not in text
    with pytest.raises(kiln.KilnError, match="unknown op \"Nope\""):
        kiln.quantize_fp16(kiln.parse_onnx(DIGITS_MODEL), ins_names=["Nope"])


@pytest.mark.parametrize("method", ["max", "percentile", "entropy"])
def test_int8_agrees_with_fp32(digits, method):
    batch, labels = digits
    target = "cpu" if "cpu" in kiln.target_names() else "ref"
    want = logits(kiln.parse_onnx(DIGITS_MODEL), target, batch)
    prog = kiln.parse_onnx(DIGITS_MODEL)
    calibration = [{"image": batch[i:i + 4]} for i in range(0, 16, 4)]
    kiln.quantize_int8(prog, kiln.get_target(target), calibration, method=method,
                       percentile=99.9)
    text = str(prog)
    # The inputs of the two Convs and two Gemms, and of the MaxPool and Flatten between them.
    assert text.count("= QuantizeLinear[") == 6
    assert "i8[16,8,3,3]" in text  # the second conv's weights, stored as int8
    got = logits(prog, target, batch)
    agreement = (got.argmax(1) == want.argmax(1)).mean()
    assert agreement >= 15 / 16, (method, agreement)
    assert (got.argmax(1) == labels).mean() >= (want.argmax(1) == labels).mean() - 1 / 16


def test_int8_scales_round_trip_through_an_artifact(tmp_path, digits):
    batch, _ = digits
    target = "cpu" if "cpu" in kiln.target_names() else "ref"
    prog = kiln.parse_onnx(DIGITS_MODEL)
    kiln.quantize_int8(prog, kiln.get_target(target), [{"image": batch}])
    want = logits(prog, target, batch)
    kiln.save(prog, tmp_path / "digits_int8.kiln")
    loaded = kiln.load(tmp_path / "digits_int8.kiln")
    # The int8 weights stay int8: in the integer convolutions on cpu, dequantized per channel on
    # ref.
    assert ("= QLinearConv[" if target == "cpu" else "DequantizeLinear[axis=0]") in str(loaded)
    assert "i8[16,8,3,3]" in str(loaded)
    np.testing.assert_array_equal(np.asarray(loaded.run({"image": batch})[0]), want)


def test_int8_errors_say_what_to_do(digits):
    batch, _ = digits
    ref = kiln.get_target("ref")
    with pytest.raises(kiln.KilnError, match="no calibration data"):
        kiln.quantize_int8(kiln.parse_onnx(DIGITS_MODEL), ref)
    with pytest.raises(kiln.KilnError, match="no tensor for input \"image\""):
        kiln.quantize_int8(kiln.parse_onnx(DIGITS_MODEL), ref, [{"x": batch}])
    with pytest.raises(kiln.KilnError, match="max, percentile or entropy"):
        kiln.quantize_int8(kiln.parse_onnx(DIGITS_MODEL), ref, [{"image": batch}],
                           method="kl")
    compiled = kiln.parse_onnx(DIGITS_MODEL)
    compiled.compile(ref)
    with pytest.raises(kiln.KilnError, match="already compiled"):
        kiln.quantize_bf16(compiled)


def test_cli_calibrates_and_verifies_images_through_a_pipeline(tmp_path, kiln_cli, digits):
    """The held-out digits as PNG files in one folder per class, read by a JSON pipeline that
    decodes, normalizes and batches them: `kiln compile --int8 --calibration-pipeline` and
    `kiln verify --int8 --pipeline`, whose accuracy uses the pipeline's labels."""
    import json
    import subprocess

    from PIL import Image

    batch, labels = digits
    images = tmp_path / "images"
    for i, (x, label) in enumerate(zip(batch, labels)):
        folder = images / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((x[0] * 240).round().astype(np.uint8), "L").save(folder / f"{i:02d}.png")
    pipeline = tmp_path / "digits.json"
    pipeline.write_text(json.dumps({
        "batch_size": 4, "num_threads": 1, "outputs": ["images", "label"],
        "operators": [
            {"op": "readers.file", "args": {}},
            {"op": "decoders.image", "args": {"output_type": "GRAY"}},
            {"op": "crop_mirror_normalize", "args": {"mean": [0.0], "std": [240.0]}}]}))
    artifact = tmp_path / "digits_int8.kiln"
    subprocess.run([kiln_cli, "compile", DIGITS_MODEL, "--int8", "--calibration", str(images),
                    "--calibration-pipeline", str(pipeline), "-o", str(artifact)],
                   check=True, capture_output=True)
    printed = subprocess.run([kiln_cli, "print", str(artifact)], check=True, capture_output=True,
                             text=True).stdout
    assert "calibration-pipeline" in printed and "= QuantizeLinear[" in printed
    verified = subprocess.run(
        [kiln_cli, "verify", DIGITS_MODEL, "--int8", "--calibration", str(images),
         "--calibration-pipeline", str(pipeline), "--inputs", str(images), "--pipeline",
         str(pipeline), "--json"], check=True, capture_output=True, text=True).stdout
    result = json.loads(verified.strip().splitlines()[-1])
    out = result["outputs"][0]
    assert out["rows"] == 16 and out["labeled"] == 16
    assert out["top1_agreement"] >= 15 / 16 * 100
    # The pipeline reproduces the model's inputs, so fp32 is as accurate as on the arrays.
    fp32 = logits(kiln.parse_onnx(DIGITS_MODEL), "ref", batch)
    assert abs(out["accuracy_fp32"] - 100 * (fp32.argmax(1) == labels).mean()) < 1e-6
