# SPDX-License-Identifier: Apache-2.0
"""The corpus rule for one output: a kiln target's result agrees with ONNX Runtime's within
`TOLERANCE` of the output's range, or, where they disagree, kiln is closer to the float64
reference than ORT is: no more elements off from float64 by more than `TOLERANCE` of the range,
and no larger error, one of the two strictly smaller.

The range of an output is max - min of the float64 reference (ORT's when there is none), or its
largest magnitude when that is larger (a constant or one-element output). Integer and bool outputs
are held to the same rule (their errors are whole numbers).

float64 is kiln's own reference (every f32 tensor widened, run on ref), so it judges precision,
not semantics: where kiln and ORT read an op differently, kiln's ref and float64 agree with each
other whoever is right, and the table says so (ref agrees with float64, ORT does not).
"""
import numpy as np

TOLERANCE = 1e-3


def output_range(reference):
    x = np.asarray(reference, dtype=np.float64)
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return 1.0
    spread = float(finite.max() - finite.min())
    magnitude = float(np.abs(finite).max())
    return max(spread, magnitude, 1e-30)


def error(got, want, scale):
    """(max |got - want| / scale, elements off by more than TOLERANCE * scale)."""
    a = np.asarray(got, dtype=np.float64)
    b = np.asarray(want, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf"), max(a.size, b.size)
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    diff = np.where(both_nan | same_inf, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if diff.size == 0:
        return 0.0, 0
    return float(diff.max() / scale), int(np.count_nonzero(diff > TOLERANCE * scale))


def judge(kiln, ort, f64):
    """The verdict for one output. `f64` may be None (no float64 reference). Returns a dict:
    vs_ort (max error relative to the range), off_vs_ort (elements off), verdict ("agrees",
    "closer to f64", "ORT closer to f64", "disagrees, no f64" or "shape differs"), passed."""
    kiln = np.asarray(kiln)
    ort = np.asarray(ort)
    if kiln.shape != ort.shape:
        return {"vs_ort": float("inf"), "off_vs_ort": None, "passed": False,
                "verdict": f"shape differs: kiln {list(kiln.shape)}, ORT {list(ort.shape)}"}
    scale = output_range(f64 if f64 is not None and np.shape(f64) == ort.shape else ort)
    vs_ort, off = error(kiln, ort, scale)
    out = {"vs_ort": vs_ort, "off_vs_ort": off, "range": scale}
    have_f64 = f64 is not None and np.shape(f64) == ort.shape
    if have_f64:
        kiln_f64, kiln_off = error(kiln, f64, scale)
        ort_f64, ort_off = error(ort, f64, scale)
        out.update(kiln_vs_f64=kiln_f64, kiln_off_vs_f64=kiln_off, ort_vs_f64=ort_f64,
                   ort_off_vs_f64=ort_off)
    if off == 0:
        return dict(out, verdict="agrees", passed=True)
    if not have_f64:
        return dict(out, verdict="disagrees, no f64", passed=False)
    if kiln_off <= ort_off and kiln_f64 <= ort_f64 and (kiln_off, kiln_f64) != (ort_off, ort_f64):
        return dict(out, verdict="closer to f64", passed=True)
    return dict(out, verdict="ORT closer to f64", passed=False)


def canonical_detections(outs):
    """``outs`` ([(name, array)] with "boxes" [N, 4], "scores" [N] and "labels" [N]) with the
    detections in one order: by score (rounded to 1e-6), label, then box (rounded to 1e-3). A
    random-weight detector scores many boxes exactly alike, and the order a sort leaves such
    ties in depends on the last bits of the features, so detections are compared as sets of
    rows."""
    d = dict(outs)
    boxes, scores, labels = d["boxes"], d["scores"], d["labels"]
    key = np.round(boxes.astype(np.float64), 3)
    order = np.lexsort((key[:, 3], key[:, 2], key[:, 1], key[:, 0], labels,
                        -np.round(scores.astype(np.float64), 6)))
    return [(n, a[order]) for n, a in outs]
