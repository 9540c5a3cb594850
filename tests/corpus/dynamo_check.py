#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Exports models with torch 2.x's dynamo ONNX exporter (opset 18 and newer) and checks kiln on
them against ONNX Runtime and against the model run by torch in float64, with the corpus's rule
(judge.py: within 1e-3 of the range of ORT, or closer to float64 than ORT).

The models: classification and segmentation nets, BERT and GPT-2 (small configurations), and the
corpus's torchvision detection, segmentation, video and optical-flow architectures (manifest.json's
`torchvision` specs, built by torchvision_export.py). Where the dynamo exporter refuses a model,
it is exported by the TorchScript exporter at opset 18 instead, and the table says so with the
dynamo exporter's reason. Detections are compared as sets of rows (judge.canonical_detections).

For a machine with torch >= 2.5, torchvision, transformers, onnxruntime and onnxscript (the GPU
machine's image has them; this project's Debian torch 1.13 has no dynamo exporter: `--legacy`
exports with its TorchScript exporter at opset 17 and stands torch's float32 output in for
ORT's, to check this script). Random weights from fixed seeds; nothing is downloaded. Writes a
table and JSON (docs/corpus.md, "torch 2.x exports").

  python3 tests/corpus/dynamo_check.py --kiln ".devpack/run kiln" --targets ref,cpu,cuda --out DIR
"""
import argparse
import copy
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import judge as corpus_judge  # noqa: E402
import torchvision_export  # noqa: E402

FALLBACK_OPSET = 18  # the TorchScript exporter's opset where the dynamo exporter refuses


def vision(name, size=224, **kw):
    def make():
        import torchvision
        model = getattr(torchvision.models, name)(weights=None, **kw)
        return model, (torch.randn(1, 3, size, size),), None
    return make


def segmentation(name):
    def make():
        import torchvision
        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None,
                                                           aux_loss=False)
        return torchvision_export.Segmentation(m), (torch.randn(1, 3, 224, 224),), None
    return make


def hf(kind):
    def make():
        import transformers
        if kind == "bert":
            cfg = transformers.BertConfig(hidden_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=256)
            m = transformers.BertModel(cfg)
        else:  # no KV cache: the exporter refuses the DynamicCache GPT-2 returns otherwise
            cfg = transformers.GPT2Config(n_embd=128, n_layer=2, n_head=4, use_cache=False)
            m = transformers.GPT2Model(cfg)
        m.config.return_dict = False
        ids = torch.randint(0, 1000, (1, 32))
        return m, (ids,), None
    return make


def corpus_torchvision(spec):
    """A corpus torchvision model (manifest.json), inputs as its export draws them."""
    def make():
        model = torchvision_export.build(spec)
        torch.manual_seed(1)
        inputs = tuple(torch.rand(*shape) for shape in spec["inputs"].values())
        return model, inputs, spec.get("outputs")
    return make


def models():
    table = {
        "resnet18": vision("resnet18"),
        "mobilenet_v3_small": vision("mobilenet_v3_small"),
        "efficientnet_b0": vision("efficientnet_b0"),
        "shufflenet_v2_x1_0": vision("shufflenet_v2_x1_0"),
        "convnext_tiny": vision("convnext_tiny"),
        "regnet_y_400mf": vision("regnet_y_400mf"),
        "swin_t": vision("swin_t"),
        "deeplabv3_mobilenet_v3_large": segmentation("deeplabv3_mobilenet_v3_large"),
        "bert_tiny": hf("bert"),
        "gpt2_tiny": hf("gpt2"),
    }
    with open(os.path.join(HERE, "manifest.json")) as f:
        for m in json.load(f)["models"]:
            if "torchvision" in m:
                table[m["id"]] = corpus_torchvision(m["torchvision"])
    return table


def tensors(out):
    """The tensors of a model's output, in order (tuples, lists, dicts flattened)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if not isinstance(out, (tuple, list)):
        return []  # None (GPT-2's absent cache), numbers
    return [t for x in out for t in tensors(x)]


def export(model_id, make, out_dir, legacy, row):
    """Exports one model; returns (path, inputs, output names, torch f32 outputs, f64 outputs)
    and records the exporter and opset used in ``row``."""
    torch.manual_seed(0)
    model, args, names = make()
    model.eval()
    path = os.path.join(out_dir, model_id + ".onnx")
    with torch.no_grad():
        want = [t.numpy() for t in tensors(model(*args))]
        args64 = tuple(a.double() if a.is_floating_point() else a for a in args)
        with torchvision_export.float64_coordinates():
            ref64 = [t.numpy() for t in tensors(copy.deepcopy(model).double()(*args64))]
        if legacy:
            torch.onnx.export(model, args, path, opset_version=17, output_names=names)
            row["exporter"] = "torchscript (--legacy)"
            return path, args, names, want, ref64
        try:
            torch.onnx.export(model, args, path, dynamo=True, external_data=False,
                              output_names=names)
            row["exporter"] = "dynamo"
        except Exception as e:  # noqa: BLE001 - the exporter's refusal is a result to record
            row["dynamo_error"] = f"{type(e).__name__}: {str(e).strip()[:400]}"
            torch.onnx.export(model, args, path, dynamo=False, opset_version=FALLBACK_OPSET,
                              output_names=names)
            row["exporter"] = "torchscript (dynamo refused)"
    return path, args, names, want, ref64


def kiln_outputs(directory):
    with open(os.path.join(directory, "outputs.json")) as f:
        listed = json.load(f)["outputs"]
    return [np.load(os.path.join(directory, o["file"])) for o in listed]


def judged(got, ort, f64, names, detection):
    """The rule per output, with detections in one order first."""
    names = names or [str(i) for i in range(len(ort))]
    sides = [list(zip(names, outs)) for outs in (got, ort, f64)]
    if detection:
        sides = [corpus_judge.canonical_detections(s) for s in sides]
    rows = []
    for (name, a), (_, b), (_, c) in zip(*sides):
        v = corpus_judge.judge(a.astype(np.float64), b.astype(np.float64), c)
        rows.append({"output": name, "vs_ort": v["vs_ort"], "off": v["off_vs_ort"],
                     "vs_f64": v.get("kiln_vs_f64"), "ort_vs_f64": v.get("ort_vs_f64"),
                     "verdict": v["verdict"], "ok": v["passed"]})
    return rows


def check(model_id, make, args, ort):
    import onnx
    row = {"model": model_id}
    t = time.time()
    path, inputs, names, want, ref64 = export(model_id, make, args.out, args.legacy, row)
    row["export_s"] = round(time.time() - t, 1)
    proto = onnx.load(path, load_external_data=False)
    row["opset"] = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    graph_inputs = [i.name for i in proto.graph.input]
    feeds = {n: a.numpy() for n, a in zip(graph_inputs, inputs)}
    names = names or [o.name for o in proto.graph.output]
    detection = {"boxes", "scores", "labels"} <= set(names)
    ort_out = want if ort is None else ort.InferenceSession(
        path, providers=["CPUExecutionProvider"]).run(None, feeds)
    row["ort"] = judged(ort_out, ort_out, ref64, names, detection)
    flags = []
    for n, a in feeds.items():
        f = os.path.join(args.out, f"{model_id}.{len(flags) // 2}.npy")
        np.save(f, a)
        flags += ["--input", f"{n}={f}"]
    for target in args.targets.split(","):
        d = os.path.join(args.out, f"{model_id}.{target}")
        t = time.time()
        r = subprocess.run(shlex.split(args.kiln) + ["run", path, "--target", target,
                           "--output-dir", d] + flags, capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            row[target] = {"error": (r.stderr or r.stdout).strip()[-400:]}
            continue
        outputs = judged(kiln_outputs(d), ort_out, ref64, names, detection)
        row[target] = {"outputs": outputs, "ok": all(o["ok"] for o in outputs),
                       "s": round(time.time() - t, 1)}
    return row


def cell(r, target):
    c = r.get(target, {})
    if "outputs" in c:
        worst = max(c["outputs"], key=lambda o: o["vs_ort"])
        return "%.1e / %.1e %s" % (worst["vs_ort"], worst["vs_f64"], "ok" if c["ok"] else "OFF")
    return c.get("error", r.get("error", r.get("status", "")))[:22]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True, help="the kiln command (may hold spaces)")
    p.add_argument("--targets", default="ref,cpu")
    table = models()
    p.add_argument("--models", default=",".join(table))
    p.add_argument("--out", required=True)
    p.add_argument("--legacy", action="store_true", help="TorchScript exporter, opset 17")
    p.add_argument("--budget", type=float, default=1e9, help="stop starting models after seconds")
    args = p.parse_args()
    try:
        import onnxruntime as ort
    except ImportError:  # this project's Debian machine: torch's own output stands in for ORT's
        if not args.legacy:
            raise
        ort = None
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    results = []
    for model_id in [m for m in args.models.split(",") if m]:
        if model_id not in table:
            raise SystemExit(f"dynamo_check: unknown model {model_id}; known: {', '.join(table)}")
        if time.time() - start > args.budget:
            results.append({"model": model_id, "status": "not run (time budget)"})
            continue
        try:
            row = check(model_id, table[model_id], args, ort)
        except Exception as e:  # a model the exporters or ORT refuse is reported, not fatal
            row = {"model": model_id, "error": f"{type(e).__name__}: {str(e)[-400:]}"}
        results.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "dynamo_check.json"), "w") as f:
        json.dump({"torch": torch.__version__, "onnxruntime": ort.__version__ if ort else None,
                   "tolerance": corpus_judge.TOLERANCE, "models": results}, f, indent=1)
    targets = args.targets.split(",")
    print("model".ljust(30), "opset", "exporter".ljust(30), "ORT vs f64".rjust(10),
          *[f"{t} vs ORT / vs f64".rjust(22) for t in targets])
    for r in results:
        ort_f64 = max((o["vs_f64"] for o in r.get("ort", [])), default=None)
        print(r["model"].ljust(30), str(r.get("opset", "")).rjust(5),
              r.get("exporter", "").ljust(30),
              ("%.1e" % ort_f64 if ort_f64 is not None else "").rjust(10),
              *[cell(r, t).rjust(22) for t in targets])
        if "dynamo_error" in r:
            print("    dynamo exporter:", r["dynamo_error"][:200])
    bad = [r["model"] for r in results
           if "error" in r or any(t in r and not r[t].get("ok", False) for t in targets)]
    print("dynamo_check: off or failing:", ", ".join(bad) if bad else "none")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
