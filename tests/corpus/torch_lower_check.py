#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lowers torchvision models with `kiln.torch.lower` and judges them against PyTorch: each
output of the lowered model against eager float32 with the corpus's rule (judge.py: within 1e-3
of the output's range, or closer to eager float64, `model.double()` on the same inputs, than
float32 is). Models lowered by parts (detectors: `kiln.torch.parts`) also have each lowered
part judged on the inputs it got in the model.

The models: the corpus's torchvision architectures (detection, segmentation, video, optical flow;
manifest.json's `torchvision` specs, built by torchvision_export.py) and the classification and
segmentation ones dynamo_check.py exports, random weights from fixed seeds (nothing is
downloaded). Without --all, the ones that lower and run in seconds on 2 cores (what ctest runs).

  PYTHONPATH=build/ci/python /usr/bin/python3 tests/corpus/torch_lower_check.py [--all]
      [--models ID,...] [--targets cpu,ref] [--json FILE] [--markdown FILE]
"""
import argparse
import collections
import copy
import json
import logging
import os
import re
import sys
import time

import torch
import torch.utils._pytree as pytree

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import judge as corpus_judge  # noqa: E402
import torchvision_export  # noqa: E402

SEED = 0


def classification(name, size=224):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None), {"image": [1, 3, size, size]}
    return make


def segmentation(name):
    def make():
        import torchvision
        model = getattr(torchvision.models.segmentation, name)(
            weights=None, weights_backbone=None, aux_loss=False)
        return torchvision_export.Segmentation(model), {"image": [1, 3, 224, 224]}
    return make


def corpus_model(spec):
    def make():
        return torchvision_export.build(spec), spec["inputs"]
    return make


def models():
    """{id: (family, make, in the quick set)}; make() -> (module, {input name: shape})."""
    table = {
        "resnet18": ("classification", classification("resnet18"), True),
        "mobilenet_v3_small": ("classification", classification("mobilenet_v3_small"), False),
        "shufflenet_v2_x1_0": ("classification", classification("shufflenet_v2_x1_0"), False),
        "efficientnet_b0": ("classification", classification("efficientnet_b0"), False),
        "regnet_y_400mf": ("classification", classification("regnet_y_400mf"), False),
        "convnext_tiny": ("classification", classification("convnext_tiny"), False),
        "swin_t": ("classification", classification("swin_t"), False),
        "deeplabv3_mobilenet_v3_large": (
            "segmentation", segmentation("deeplabv3_mobilenet_v3_large"), False),
    }
    with open(os.path.join(HERE, "manifest.json")) as f:
        manifest = json.load(f)
    quick = {"tv_lraspp_mobilenet_v3", "tv_raft_small", "tv_ssdlite320_mobilenet_v3",
             "tv_mc3_18"}
    for m in manifest["models"]:
        if "torchvision" in m:
            spec = m["torchvision"]
            table[m["id"]] = (spec["family"], corpus_model(spec), m["id"] in quick)
    return table


class Messages(logging.Handler):
    """Collects the kiln.torch logger's messages of one lowering."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def left_in_pytorch(lines):
    """{'<op>: <reason>': count} from the splitter's "stays in PyTorch" lines."""
    counts = collections.Counter()
    for line in lines:
        m = re.match(r"kiln\.torch: (\S+) (.+?) stays in PyTorch: (.*)", line)
        if m:
            target = re.sub(r"<(function|built-in function|method) ([\w.]+).*?>", r"\2",
                            m.group(2))
            target = re.sub(r"^[\w.]*\.(\d+)$", r"module", target)  # module paths: their type
            counts[f"{target}: {m.group(3)}"] += 1
    return dict(counts.most_common())


def outputs_of(value, names):
    """[(name, array)] of a model's output (a tensor, a tuple, a dict)."""
    leaves = [x for x in pytree.tree_flatten(value)[0] if isinstance(x, torch.Tensor)]
    names = names or (["out"] if len(leaves) == 1 else [str(i) for i in range(len(leaves))])
    return [(n, x.detach().cpu().numpy()) for n, x in zip(names, leaves)]


def judged(got, want32, want64):
    """The rule per output; "ORT" in the judge's words is eager float32 here."""
    rows = []
    for (name, a), (_, b), (_, c) in zip(got, want32, want64):
        v = corpus_judge.judge(a, b, c)
        rows.append({"output": name, "vs_torch": v["vs_ort"], "off": v["off_vs_ort"],
                     "kiln_vs_f64": v.get("kiln_vs_f64"), "torch_vs_f64": v.get("ort_vs_f64"),
                     "verdict": v["verdict"].replace("ORT", "torch"), "passed": v["passed"]})
    return rows


def as_double(tree):
    return pytree.tree_map(lambda x: x.double() if isinstance(x, torch.Tensor)
                           and x.is_floating_point() else x, tree)


class PartCalls:
    """Records each call of the lowered parts (kiln.torch.parts.LoweredPart) of a model."""

    def __init__(self, lowered):
        from kiln.torch.parts import LoweredPart
        self.calls, self.hooks = [], []
        for part in lowered.modules():
            if isinstance(part, LoweredPart):
                self.hooks.append(part.register_forward_hook(self.record))

    def record(self, part, args, output):
        self.calls.append((part, args, output))

    def remove(self):
        for h in self.hooks:
            h.remove()


def judge_parts(calls):
    """Each recorded part call: kiln's output against the original submodule in float32 and in
    float64 on the same arguments."""
    rows, doubles = [], {}
    for part, args, output in calls:
        if part not in doubles:
            doubles[part] = copy.deepcopy(part.original).double()
        with torch.no_grad():
            want32 = part.original(*args)
            want64 = doubles[part](*as_double(args))
        got = outputs_of(output, None)
        for row in judged(got, outputs_of(want32, None), outputs_of(want64, None)):
            row["output"] = f"{part.name}[{row['output']}]"
            rows.append(row)
    return rows


def check(model_id, family, make, target, threads):
    import kiln.torch
    torch.manual_seed(SEED)
    model, shapes = make()
    model = model.eval()
    names = list(shapes)
    torch.manual_seed(1)
    inputs = tuple(torch.rand(*shapes[n]) for n in names)
    output_names = ["boxes", "scores", "labels"] if family == "detection" else None
    row = {"model": model_id, "family": family, "target": target,
           "inputs": {n: shapes[n] for n in names}}
    start = time.monotonic()
    with torch.no_grad():
        want32 = outputs_of(model(*inputs), output_names)
        with torchvision_export.float64_coordinates():
            want64 = outputs_of(copy.deepcopy(model).double()(*as_double(inputs)), output_names)
    row["eager_s"] = round(time.monotonic() - start, 1)
    messages = Messages()
    log = logging.getLogger("kiln.torch")
    log.addHandler(messages)
    log.setLevel(logging.INFO)
    log.propagate = False  # torch's partitioner sets up the root logger; keep this quiet
    try:
        start = time.monotonic()
        lowered = kiln.torch.lower(model, inputs, target=target, threads=threads)
        row["lower_s"] = round(time.monotonic() - start, 1)
    finally:
        log.removeHandler(messages)
        log.propagate = True
    row["kiln_islands"] = len(kiln.torch.kiln_islands(lowered))
    parts = [p for p in lowered.modules() if isinstance(p, kiln.torch.parts.LoweredPart)]
    row["lowered"] = "by parts" if parts else "whole"
    row["parts"] = [p.name for p in parts]
    row["left_in_pytorch"] = left_in_pytorch(messages.lines)
    row["untraced"] = [ln.replace("kiln.torch: ", "") for ln in messages.lines
                       if "cannot be traced" in ln or "called with an argument" in ln]
    recorder = PartCalls(lowered)
    start = time.monotonic()
    try:
        with torch.no_grad():
            got = outputs_of(lowered(*inputs), output_names)
    finally:
        recorder.remove()
    row["run_s"] = round(time.monotonic() - start, 1)
    if family == "detection":
        got, want32, want64 = (corpus_judge.canonical_detections(o)
                               for o in (got, want32, want64))
    row["outputs"] = judged(got, want32, want64)
    row["parts_judged"] = judge_parts(recorder.calls)
    row["passed"] = all(r["passed"] for r in row["outputs"] + row["parts_judged"])
    return row


def summary(row):
    if "error" in row:
        return row["error"][:120]
    left = sum(row["left_in_pytorch"].values())
    if row["parts"]:
        return (f"by parts, {row['kiln_islands']} kiln island(s) in {', '.join(row['parts'])}; "
                f"the rest of the forward in PyTorch")
    return f"whole, {row['kiln_islands']} kiln island(s), {left} call(s) left in PyTorch"


def markdown(results):
    lines = ["| model | family | lowered | output | vs torch f32 | torch f32 vs f64 | "
             "kiln vs f64 | verdict |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['family']} | error: {r['error'][:160]} "
                         f"| | | | | |")
            continue
        how = f"{r['lowered']}, {r['kiln_islands']} island(s)"
        for o in r["outputs"]:
            lines.append(
                f"| {r['model']} | {r['family']} | {how} | `{o['output']}` | {o['vs_torch']:.1e} "
                f"| {o['torch_vs_f64']:.1e} | {o['kiln_vs_f64']:.1e} | {o['verdict']} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", help="comma-separated ids (default: the quick set, --all: all)")
    p.add_argument("--all", action="store_true", help="every model, the heavy ones included")
    p.add_argument("--targets", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="kiln's intra-op threads (0: cores)")
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--list", action="store_true", help="print the models and exit")
    args = p.parse_args()
    table = models()
    if args.list:
        for model_id, (family, _, quick) in table.items():
            print(model_id, family, "quick" if quick else "--all")
        return 0
    if args.models:
        chosen = [m for m in args.models.split(",") if m]
        unknown = [m for m in chosen if m not in table]
        if unknown:
            raise SystemExit(f"torch_lower_check: unknown model(s) {', '.join(unknown)}; "
                             f"--list shows them")
    else:
        chosen = [m for m, (_, _, quick) in table.items() if quick or args.all]
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    for model_id in chosen:
        family, make, _ = table[model_id]
        for target in args.targets.split(","):
            start = time.monotonic()
            try:
                row = check(model_id, family, make, target, args.threads)
            except Exception as e:  # a model the bridge refuses is reported, not fatal
                row = {"model": model_id, "family": family, "target": target, "passed": False,
                       "error": f"{type(e).__name__}: {str(e)[-600:]}"}
            row["seconds"] = round(time.monotonic() - start, 1)
            results.append(row)
            status = "ok" if row["passed"] else "FAILED"
            print(f"{model_id} [{target}] {status} ({row['seconds']} s): {summary(row)}",
                  flush=True)
            for o in row.get("outputs", []) + row.get("parts_judged", []):
                print(f"    {o['output']}: {o['vs_torch']:.1e} of the range vs torch f32, "
                      f"{o['verdict']}" + ("" if o["passed"] else "  <-- FAILS"), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "tolerance": corpus_judge.TOLERANCE,
                       "models": results}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(results))
    bad = sorted({r["model"] for r in results if not r["passed"]})
    print("torch_lower_check:", f"{len(results) - len(bad)} of {len(results)} pass",
          "; failing: " + ", ".join(bad) if bad else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
