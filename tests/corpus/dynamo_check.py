#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Exports models with torch 2.x's dynamo ONNX exporter (opset 18 and newer) and checks kiln on
them against ONNX Runtime and against the model run by torch in float64.

For a machine with torch >= 2.5, torchvision, transformers, onnxruntime and onnxscript (the GPU
machine's image has them; this project's Debian torch 1.13 has no dynamo exporter: `--legacy`
exports with the TorchScript exporter there, to check this script). Random weights from fixed
seeds; nothing is downloaded. Writes a table and JSON (docs/corpus.md, "torch 2.x exports").

  python3 tests/corpus/dynamo_check.py --kiln ".devpack/run kiln" --targets ref,cpu,cuda --out DIR
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import torch

TOLERANCE = 1e-3  # of each output's range, as the corpus judges


def vision(name, size=224, **kw):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw), (torch.randn(1, 3, size, size),)
    return make


def segmentation(name):
    def make():
        import torchvision
        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None,
                                                           aux_loss=False)
        return m, (torch.randn(1, 3, 224, 224),)
    return make


def hf(kind):
    def make():
        import transformers
        if kind == "bert":
            cfg = transformers.BertConfig(hidden_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=256)
            m = transformers.BertModel(cfg)
        else:
            cfg = transformers.GPT2Config(n_embd=128, n_layer=2, n_head=4, use_cache=False)
            m = transformers.GPT2Model(cfg)
        m.config.return_dict = False
        ids = torch.randint(0, 1000, (1, 32))
        return m, (ids,)
    return make


MODELS = {
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


def first_output(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(out, dict):
        out = next(iter(out.values()))
    return out


def export(model_id, make, out_dir, legacy):
    torch.manual_seed(0)
    model, args = make()
    model.eval()
    path = os.path.join(out_dir, model_id + ".onnx")
    with torch.no_grad():
        want = first_output(model(*args)).numpy()
        f64 = model.double()
        args64 = tuple(a.double() if a.is_floating_point() else a for a in args)
        ref64 = first_output(f64(*args64)).numpy()
        model.float()
        if legacy:
            torch.onnx.export(model, args, path, opset_version=17)
        else:
            torch.onnx.export(model, args, path, dynamo=True, external_data=False)
    return path, args, want, ref64


def judge(got, ort, f64):
    scale = max(float(np.ptp(f64)), 1e-12)
    row = {"vs_ort": float(np.max(np.abs(got - ort))) / scale,
           "vs_f64": float(np.max(np.abs(got - f64))) / scale,
           "ort_vs_f64": float(np.max(np.abs(ort - f64))) / scale}
    row["ok"] = row["vs_ort"] <= TOLERANCE or row["vs_f64"] <= row["ort_vs_f64"]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True, help="the kiln command (may hold spaces)")
    p.add_argument("--targets", default="ref,cpu")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--out", required=True)
    p.add_argument("--legacy", action="store_true", help="TorchScript exporter, opset 17")
    p.add_argument("--budget", type=float, default=1e9, help="stop starting models after seconds")
    args = p.parse_args()
    import onnx
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
        if time.time() - start > args.budget:
            results.append({"model": model_id, "status": "not run (time budget)"})
            continue
        row = {"model": model_id}
        results.append(row)
        try:
            t = time.time()
            path, inputs, want, ref64 = export(model_id, MODELS[model_id], args.out, args.legacy)
            row["export_s"] = round(time.time() - t, 1)
            proto = onnx.load(path, load_external_data=False)
            row["opset"] = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
            names = [i.name for i in proto.graph.input]
            feeds = {n: a.numpy() for n, a in zip(names, inputs)}
            ort_out = want if ort is None else ort.InferenceSession(
                path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            row["ort"] = judge(ort_out, ort_out, ref64)
            row["ort"]["vs_torch"] = float(np.max(np.abs(ort_out - want)))
            flags = []
            for n, a in feeds.items():
                f = os.path.join(args.out, f"{model_id}.{len(flags)}.npy")
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
                with open(os.path.join(d, "outputs.json")) as f:
                    got = np.load(os.path.join(d, json.load(f)["outputs"][0]["file"]))
                row[target] = judge(got.astype(np.float64), ort_out.astype(np.float64), ref64)
                row[target]["s"] = round(time.time() - t, 1)
        except Exception as e:  # a model the exporter or ORT refuses is reported, not fatal
            row["error"] = f"{type(e).__name__}: {str(e)[-400:]}"
        print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "dynamo_check.json"), "w") as f:
        json.dump({"torch": torch.__version__, "onnxruntime": ort.__version__ if ort else None,
                   "tolerance": TOLERANCE, "models": results}, f, indent=1)
    targets = args.targets.split(",")
    print("model".ljust(30), "opset", "ORT vs f64".rjust(10),
          *[f"{t} vs ORT / vs f64".rjust(22) for t in targets])
    for r in results:
        cells = []
        for t in targets:
            c = r.get(t, {})
            cells.append(("%.1e / %.1e %s" % (c["vs_ort"], c["vs_f64"], "ok" if c["ok"] else "OFF"))
                         if "vs_ort" in c else (c.get("error", r.get("error", r.get("status", "")))
                                                [:22]))
        o = r.get("ort", {})
        print(r["model"].ljust(30), str(r.get("opset", "")).rjust(5),
              ("%.1e" % o["vs_f64"] if o else "").rjust(10), *[c.rjust(22) for c in cells])
    bad = [r["model"] for r in results
           if any(t in r and not r[t].get("ok", False) for t in targets)]
    print("dynamo_check: off or failing:", ", ".join(bad) if bad else "none")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
