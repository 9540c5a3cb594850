# SPDX-License-Identifier: Apache-2.0
"""The corpus rule (judge.py) and input builders (inputs.py) on small arrays."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import inputs  # noqa: E402
import judge  # noqa: E402


def test_agreement_within_a_thousandth_of_the_range():
    ort = np.linspace(-1, 1, 100, dtype=np.float32)
    got = judge.judge(ort + 1e-4, ort, ort.astype(np.float64))
    assert got["passed"] and got["verdict"] == "agrees"
    assert abs(got["vs_ort"] - 5e-5) < 1e-6  # 1e-4 over a range of 2


def test_a_tie_ort_made_is_judged_against_float64():
    # M-LSD's peak mask: ORT zeroes a score that float64 (and kiln) keep.
    f64 = np.array([0.0, 0.3, 0.0, 0.5])
    kiln = f64.astype(np.float32)
    ort = np.array([0.0, 0.0, 0.0, 0.5], dtype=np.float32)
    got = judge.judge(kiln, ort, f64)
    assert got["passed"] and got["verdict"] == "closer to f64"
    assert got["off_vs_ort"] == 1 and got["kiln_off_vs_f64"] == 0


def test_kiln_off_where_ort_is_right_fails():
    f64 = np.array([0.0, 0.3, 0.0, 0.5])
    got = judge.judge(np.array([0.0, 0.0, 0.0, 0.5], np.float32), f64.astype(np.float32), f64)
    assert not got["passed"] and got["verdict"] == "ORT closer to f64"


def test_fewer_elements_off_but_a_larger_error_is_not_closer():
    f64 = np.zeros(10)
    f64[0] = 1.0
    ort = f64.copy()
    ort[1:4] = 0.01  # three elements a little off
    kiln = f64.copy()
    kiln[5] = 0.9  # one element far off
    got = judge.judge(kiln, ort, f64)
    assert not got["passed"]


def test_disagreement_without_float64_fails():
    got = judge.judge(np.ones(3, np.float32), np.zeros(3, np.float32), None)
    assert not got["passed"] and got["verdict"] == "disagrees, no f64"


def test_shapes_must_match():
    got = judge.judge(np.zeros((2, 3)), np.zeros((3, 2)), None)
    assert not got["passed"] and got["verdict"].startswith("shape differs")


def test_a_one_element_output_is_measured_against_its_magnitude():
    assert judge.output_range(np.array([[0.25]])) == 0.25
    assert judge.output_range(np.array([0.5, 0.51])) == 0.51


def test_inputs_are_seeded_and_in_range():
    audio = {"dtype": "float32", "shape": [1, 576], "fill": "audio", "amplitude": 0.5}
    a = inputs.make_input(audio, 7)
    assert a.dtype == np.float32 and a.shape == (1, 576)
    assert abs(np.abs(a).max() - 0.5) < 1e-6
    assert np.array_equal(a, inputs.make_input(audio, 7))
    assert not np.array_equal(a, inputs.make_input(audio, 8))
    image = {"dtype": "float32", "shape": [1, 8, 8, 4], "fill": "image", "layout": "NHWC",
             "low": 0.0, "high": 255.0, "constant_channels": {"3": 1.0}}
    x = inputs.make_input(image, 1)
    assert x[..., :3].min() == 0.0 and x[..., :3].max() == 255.0
    assert np.all(x[..., 3] == 1.0)
    sr = inputs.make_input({"dtype": "int64", "shape": [], "fill": "value", "value": 16000}, 0)
    assert sr.dtype == np.int64 and sr.shape == () and sr == 16000


def test_detections_tied_in_score_compare_as_sets_of_rows():
    boxes = np.array([[0, 0, 4, 4], [1, 1, 5, 5], [2, 2, 6, 6], [3, 3, 7, 7]], np.float32)
    scores = np.array([0.9, 0.5, 0.5, 0.5], np.float32)
    labels = np.array([1, 2, 2, 2])
    order = [0, 3, 1, 2]  # the tied rows in another order
    a = judge.canonical_detections([("boxes", boxes), ("scores", scores), ("labels", labels)])
    b = judge.canonical_detections([("boxes", boxes[order]), ("scores", scores[order]),
                                    ("labels", labels[order])])
    for (name, x), (_, y) in zip(a, b):
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert a[1][1].tolist() == sorted(scores.tolist(), reverse=True)
    # A box that differs is still found.
    moved = boxes.copy()
    moved[2, 0] += 1.0
    c = judge.canonical_detections([("boxes", moved), ("scores", scores), ("labels", labels)])
    assert not np.array_equal(dict(a)["boxes"], dict(c)["boxes"])
