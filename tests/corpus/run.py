# SPDX-License-Identifier: Apache-2.0
"""Runs the corpus: every model on kiln's targets, on ONNX Runtime and on kiln's float64
reference (`kiln run --precision f64` on ref), with the same inputs, and judges each output
(judge.py). Prints a table and writes JSON; exits 1 when a model fails the rule.

usage: tests/corpus/run [--targets ref,cpu] [--models ID,...] [--json FILE] [--cache DIR]
                        [--kiln PATH] [--ci] [--markdown FILE] [--reuse-references]
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import inputs as corpus_inputs  # noqa: E402
import judge as corpus_judge  # noqa: E402
import setup as corpus_setup  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def find_kiln(given):
    if given:
        return given
    for preset in ("release", "ci"):
        path = os.path.join(ROOT, "build", preset, "tools", "kiln")
        if os.access(path, os.X_OK):
            return path
    raise SystemExit("corpus: no kiln binary; build one (scripts/dev build ci) or pass --kiln")


def tail(text, lines=6):
    return "\n".join(text.strip().splitlines()[-lines:])


def run_command(cmd, timeout):
    """(seconds, error message or None)."""
    start = time.monotonic()
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    try:
        result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return time.monotonic() - start, f"timed out after {timeout} s"
    seconds = time.monotonic() - start
    if result.returncode != 0:
        return seconds, tail(result.stdout) or f"exit status {result.returncode}"
    return seconds, None


def read_outputs(out_dir):
    """{tensor name: array} from an outputs.json folder (kiln run --output-dir, ort_run.js)."""
    with open(os.path.join(out_dir, "outputs.json")) as f:
        listed = json.load(f)["outputs"]
    return {o["name"]: np.load(os.path.join(out_dir, o["file"])) for o in listed}


class Runner:
    def __init__(self, args, manifest, paths):
        self.args = args
        self.manifest = manifest
        self.paths = paths
        self.kiln = find_kiln(args.kiln)
        self.ort = corpus_setup.ort_dir(args.cache)
        self.work = os.path.join(args.cache, "runs")

    def kiln_run(self, model_path, feeds, out_dir, target, precision=None):
        cmd = [self.kiln, "run", model_path, "--target", target, "--output-dir", out_dir]
        if precision:
            cmd += ["--precision", precision]
        for name, path in feeds.items():
            cmd += ["--input", f"{name}={path}"]
        return run_command(cmd, self.args.timeout)

    def ort_run(self, model_path, feeds, out_dir):
        cmd = ["node", os.path.join(HERE, "ort_run.js"), self.ort, model_path, out_dir]
        cmd += [f"{name}={path}" for name, path in feeds.items()]
        return run_command(cmd, self.args.timeout)

    def run_model(self, model, model_path):
        work = os.path.join(self.work, model["id"])
        os.makedirs(os.path.join(work, "inputs"), exist_ok=True)
        feeds = {}
        source = corpus_setup.source_of(self.manifest, model)
        arrays = corpus_inputs.make_inputs(dict(model, id=source["id"],
                                                inputs=model.get("inputs", source["inputs"])),
                                           self.manifest["seed"])
        for i, (name, array) in enumerate(arrays.items()):
            feeds[name] = os.path.join(work, "inputs", f"input{i}.npy")
            np.save(feeds[name], array)
        result = {"id": model["id"], "package": source.get("package", "torchvision"),
                  "path": source.get("path", source.get("torchvision", {}).get("builder")),
                  "times_s": {}, "errors": {}}
        if source is not model:
            result["derived"] = model["derive"]
        # The float64 reference of a model converted to a narrower type is its source's.
        f64_path = self.paths[source["id"]] if model.get("f64_from_source") else model_path
        runs = {}
        for side in ["ort", "f64"] + self.args.targets:
            out_dir = os.path.join(work, side)
            reuse = self.args.reuse_references and side in ("ort", "f64")
            if reuse and os.path.exists(os.path.join(out_dir, "outputs.json")):
                runs[side] = read_outputs(out_dir)
                continue
            shutil.rmtree(out_dir, ignore_errors=True)
            if side == "ort":
                seconds, err = self.ort_run(model_path, feeds, out_dir)
            elif side == "f64":
                seconds, err = self.kiln_run(f64_path, feeds, out_dir, "ref", "f64")
            else:
                seconds, err = self.kiln_run(model_path, feeds, out_dir, side)
            result["times_s"][side] = round(seconds, 2)
            if err is None:
                runs[side] = read_outputs(out_dir)
            else:
                result["errors"][side] = err
        result["outputs"] = self.judge(runs, result["errors"])
        # expected_failure: a reason (every target) or {target: reason}.
        expected = model.get("expected_failure") or {}
        if isinstance(expected, str):
            expected = {t: expected for t in self.args.targets}
        passed = {t: t not in result["errors"] and "ort" in runs and
                  all(o[t]["passed"] for o in result["outputs"]) for t in self.args.targets}
        unexpected = [t for t in self.args.targets if t in expected and passed[t]]
        failed = [t for t in self.args.targets if t not in expected and not passed[t]]
        known = [t for t in self.args.targets if t in expected and not passed[t]]
        if failed:
            result["status"] = "FAIL"
        elif unexpected:
            result["status"] = "unexpected pass"
            result["note"] = (f"passes on {', '.join(unexpected)} now: drop that expected_failure "
                              "from the manifest")
        elif known:
            result["status"] = "expected failure"
            result["note"] = "; ".join(f"{t}: {expected[t]}" for t in known)
        else:
            result["status"] = "pass"
        return result

    def judge(self, runs, errors):
        ort = runs.get("ort")
        if ort is None:
            return []
        f64 = runs.get("f64", {})
        outputs = []
        for name, want in ort.items():
            row = {"name": name}
            for target in self.args.targets:
                got = runs.get(target, {}).get(name)
                if got is None:
                    why = errors.get(target, "no such output")
                    row[target] = {"passed": False, "verdict": "no result", "error": why}
                    continue
                row[target] = corpus_judge.judge(got, want, f64.get(name))
            outputs.append(row)
        return outputs


def first_line(text):
    """The line of a kiln or ORT error that says what went wrong."""
    text = re.sub(r"/\S+/([^/\s]+\.onnx)", r"\1", text or "")  # the cache's path to a model
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("kiln:", "ort_run:")):
            return line
    return lines[0] if lines else ""


def fmt_err(x):
    if x is None:
        return "-"
    return "inf" if x == float("inf") else f"{x:.1e}"


def cell(o):
    if o.get("verdict") == "no result":
        return "error"
    text = f"{fmt_err(o.get('vs_ort'))} {o['verdict']}"
    if o.get("off_vs_ort"):
        text += f" ({o['off_vs_ort']} el)"
    return text


def f64_note(o):
    if "kiln_off_vs_f64" not in o or o.get("off_vs_ort") == 0:
        return ""
    return (f"kiln {o['kiln_off_vs_f64']} el/{fmt_err(o['kiln_vs_f64'])}, "
            f"ORT {o['ort_off_vs_f64']} el/{fmt_err(o['ort_vs_f64'])}")


def print_table(results, targets):
    head = f"{'model':<24} {'output':<18}"
    for t in targets:
        head += f" {t + ' vs ORT':<30}"
    print(head + " float64 judgement (elements off / max error vs f64)")
    for r in results:
        if not r["outputs"]:
            why = "; ".join(f"{k}: {first_line(v)}" for k, v in r["errors"].items())
            print(f"{r['id']:<24} {'-':<18} {r['status']}: {why}")
            continue
        for o in r["outputs"]:
            line = f"{r['id']:<24} {o['name'][:18]:<18}"
            notes = []
            for t in targets:
                line += f" {cell(o[t]):<30}"
                if f64_note(o[t]):
                    notes.append(f"{t}: {f64_note(o[t])}")
            print(line + " " + "; ".join(notes))
        for side, err in r["errors"].items():
            print(f"{'':<24} {side} failed: {first_line(err)}")
        if r["status"] != "pass":
            print(f"{'':<24} -> {r['status']}{': ' + r['note'] if r.get('note') else ''}")


def markdown_table(results, targets):
    """The results as a Markdown table (docs/corpus.md)."""
    lines = ["| model | output | " + " | ".join(f"{t} vs ORT" for t in targets) +
             " | float64 judgement |", "|---" * (3 + len(targets)) + "|"]
    for r in results:
        if not r["outputs"]:
            why = "; ".join(f"{k}: {first_line(v)}" for k, v in r["errors"].items())
            lines.append(f"| {r['id']} | - | " + " | ".join("error" for _ in targets) +
                         f" | {r['status']}: {why} |")
            continue
        for o in r["outputs"]:
            notes = "; ".join(f"{t}: {f64_note(o[t])}" for t in targets if f64_note(o[t]))
            if r["status"] != "pass":
                errors = [first_line(v) for v in r["errors"].values()]
                notes = "; ".join(n for n in [notes, f"{r['status']}: " + "; ".join(
                    [r.get("note", "")] + errors[:1])] if n)
            lines.append(f"| {r['id']} | `{o['name']}` | " +
                         " | ".join(cell(o[t]) for t in targets) + f" | {notes} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="ref,cpu", help="kiln targets (ref,cpu,cuda)")
    parser.add_argument("--models", default="", help="comma-separated model ids (default: all)")
    parser.add_argument("--json", default="", help="write the results here (default: "
                        "CACHE/corpus.json)")
    parser.add_argument("--cache", default=corpus_setup.default_cache())
    parser.add_argument("--kiln", default=os.environ.get("KILN", ""), help="the kiln binary")
    parser.add_argument("--ci", action="store_true", help="only the models marked ci in the "
                        "manifest")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run")
    parser.add_argument("--markdown", default="", help="also write the table as Markdown here")
    parser.add_argument("--reuse-references", action="store_true",
                        help="take ORT's and float64's outputs from the cache's last run (for a "
                        "machine without ORT, e.g. the GPU machine with --targets cuda)")
    args = parser.parse_args()
    args.targets = [t for t in args.targets.split(",") if t]
    manifest = corpus_setup.load_manifest()
    models = corpus_setup.select_models(manifest, [m for m in args.models.split(",") if m])
    if args.ci:
        models = [m for m in models if m.get("ci", True)]
    paths = corpus_setup.setup(args.cache, models,
                               None if args.reuse_references else manifest["onnxruntime_node"])
    runner = Runner(args, manifest, paths)
    results = []
    for model in models:
        results.append(runner.run_model(model, paths[model["id"]]))
        print(f"corpus: {model['id']}: {results[-1]['status']} "
              f"({', '.join(f'{k} {v} s' for k, v in results[-1]['times_s'].items())})",
              file=sys.stderr, flush=True)
    print_table(results, args.targets)
    failed = [r["id"] for r in results if r["status"] in ("FAIL", "unexpected pass")]
    version = subprocess.run([runner.kiln, "--version"], stdout=subprocess.PIPE, text=True)
    report = {"kiln": version.stdout.strip(), "onnxruntime_node": manifest["onnxruntime_node"],
              "machine": platform.machine(), "processor": platform.processor(),
              "targets": args.targets, "tolerance": corpus_judge.TOLERANCE,
              "models": results}
    json_path = args.json or os.path.join(args.cache, "corpus.json")
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown_table(results, args.targets))
    passed = sum(r["status"] == "pass" for r in results)
    print(f"corpus: {passed} passed, {len(failed)} failed, "
          f"{sum(r['status'] == 'expected failure' for r in results)} expected failures; "
          f"JSON in {json_path}")
    if failed:
        print(f"corpus: failing: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
