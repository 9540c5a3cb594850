# SPDX-License-Identifier: Apache-2.0
# The `kiln` CLI's everyday options on the real binary: --json on every subcommand that reports
# (stdout is exactly one JSON object, logs and progress go to stderr), the target each command
# picks (--target, else KILN_TARGET, else cpu), the global --log-level, and --version's build facts.
# Run by ctest (e2e.cli_json) with KILN_CLI set to the binary under test:
#   KILN_CLI=build/ci/tools/kiln /usr/bin/python3 -m pytest -q tests/e2e/cli_json_test.py
import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILN = os.environ.get("KILN_CLI") or os.path.join(ROOT, "build", "ci", "tools", "kiln")
DIGITS = os.path.join(ROOT, "examples", "repository", "digits", "1", "model.onnx")
DIGITS_PIPELINE = os.path.join(ROOT, "examples", "repository", "digits_pipeline", "1",
                               "pipeline.json")
IMAGES = os.path.join(ROOT, "examples", "digit_images")
TINY = os.path.join(ROOT, "examples", "models", "tiny_cnn.onnx")


def targets():
    """The targets this build runs here (kiln devices --json)."""
    return kiln_json("devices", "--json")["targets"]


def default_target():
    return "cpu" if "cpu" in targets() else "ref"


def kiln(*args, env=None, check=True):
    """Runs the CLI with KILN_TARGET and KILN_LOG_LEVEL unset unless `env` sets them."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("KILN_TARGET", "KILN_LOG_LEVEL")}
    full_env.update(env or {})
    r = subprocess.run([KILN, *map(str, args)], capture_output=True, text=True, env=full_env,
                       timeout=300)
    if check:
        assert r.returncode == 0, f"kiln {' '.join(map(str, args))}: {r.stdout}\n{r.stderr}"
    return r


def kiln_json(*args, env=None):
    """The one JSON object the command prints: json.loads fails on anything else on stdout."""
    r = kiln(*args, env=env)
    return json.loads(r.stdout)


def label_of(image):
    return int(re.search(r"_label(\d)\.png$", image).group(1))


def test_run_json_classifies_a_real_digit_image():
    image = os.path.join(IMAGES, "07_label7.png")
    out = kiln_json("run", DIGITS, "--pipeline", DIGITS_PIPELINE, "--input", f"image={image}",
                    "--top", 3, "--json")
    assert out["model"] == DIGITS
    assert out["target"] == default_target()
    assert out["artifact"] is False
    assert out["compile_ms"] > 0 and out["run_ms"] > 0
    assert out["output_dir"] is None
    [logits] = out["outputs"]
    assert logits["name"] == "logits" and logits["dtype"] == "f32" and logits["shape"] == [1, 10]
    values = logits["values"]
    assert len(values) == 10
    best = max(range(10), key=lambda i: values[i])
    assert best == label_of(image) == 7
    [top] = logits["top"]
    assert [c["class"] for c in top][0] == 7 and len(top) == 3
    assert top[0]["score"] == values[7] and top[0]["score"] >= top[1]["score"] >= top[2]["score"]


def test_run_classifies_every_bundled_digit_as_its_label():
    files = sorted(f for f in os.listdir(IMAGES) if f.endswith(".png"))
    assert len(files) == 16
    args = ["run", DIGITS, "--pipeline", DIGITS_PIPELINE, "--top", 1, "--json"]
    for f in files:  # several images for one input make one batch, in the order given
        args += ["--input", "image=" + os.path.join(IMAGES, f)]
    [logits] = kiln_json(*args)["outputs"]
    assert logits["shape"] == [16, 10]
    assert [row[0]["class"] for row in logits["top"]] == [label_of(f) for f in files]


def test_run_json_of_an_artifact_reports_its_load(tmp_path):
    artifact = tmp_path / "d.kiln"
    kiln("compile", DIGITS, "--batch", 2, "-o", artifact)
    out = kiln_json("run", artifact, "--json")
    assert out["artifact"] is True and out["load_ms"] > 0 and out["target"] == default_target()
    assert out["outputs"][0]["shape"] == [2, 10]


def test_verify_json_reports_the_error_under_its_bound():
    out = kiln_json("verify", DIGITS, "--input-shape", "image=4x1x8x8", "--seed", 3, "--json")
    assert out["target"] == default_target() and out["reference"] == "ref"
    assert out["rtol"] == 1e-3 and out["atol"] == 1e-5
    [logits] = out["outputs"]
    assert logits["name"] == "logits" and logits["within"] is True
    assert 0 <= logits["max_err_over_bound"] <= 1
    assert 0 <= logits["max_abs_err"] < 1e-3
    assert out["agree"] is True
    # An impossible bound: the same errors, now over it, and the command fails.
    r = kiln("verify", DIGITS, "--input-shape", "image=4x1x8x8", "--seed", 3, "--target", "ref",
             "--rtol", 0, "--atol", 0, "--json")
    assert r.returncode == 0  # ref against ref: exactly equal
    assert json.loads(r.stdout)["outputs"][0]["max_abs_err"] == 0


def test_compile_json_describes_the_artifact(tmp_path):
    artifact = tmp_path / "tiny.kiln"
    out = kiln_json("compile", TINY, "--batch", 1, "-o", artifact, "--json")
    assert out["output"] == str(artifact)
    assert out["bytes"] == os.path.getsize(artifact) > 0
    assert out["target"] == default_target() and out["precision"] == "fp32"
    assert out["inputs"] == [{"name": "image", "type": "f32[1,1,28,28]"}]
    assert out["outputs"] == [{"name": "probabilities", "type": "f32[1,10]"}]
    assert out["recompile_command"].startswith(f"kiln compile {TINY} --target {out['target']}")


def test_perf_json_has_every_timed_run():
    out = kiln_json("perf", DIGITS, "--batch", 2, "--iterations", 4, "--warmup", 1, "--json")
    assert out["target"] == default_target() and out["batch"] == 2 and out["iterations"] == 4
    assert len(out["times_ms"]) == 4 and all(t > 0 for t in out["times_ms"])
    assert min(out["times_ms"]) == pytest.approx(out["min_ms"], abs=1e-3)
    assert sum(k["steps"] for k in out["kinds"]) == len(out["steps"]) > 0


def test_print_json_of_a_model_and_an_artifact(tmp_path):
    out = kiln_json("print", TINY, "--json")
    assert out["artifact"] is None and out["optimized_for"] is None
    graph = out["graph"]
    assert [i["name"] for i in graph["inputs"]] == ["image"]
    assert graph["inputs"][0]["type"].endswith(",1,28,28]")
    conv1 = next(n for n in graph["nodes"] if n["name"] == "conv1")
    assert conv1["op"] == "Conv" and conv1["inputs"] == ["image", "conv1.w", "conv1.b"]
    assert graph["outputs"] == ["probabilities"]
    optimized = kiln_json("print", TINY, "--optimized", "--json")
    assert optimized["optimized_for"] == default_target()
    artifact = tmp_path / "tiny.kiln"
    kiln("compile", TINY, "--batch", 1, "--target", "ref", "-o", artifact)
    out = kiln_json("print", artifact, "--json")
    assert out["artifact"]["target"] == "ref" and out["optimized_for"] == "ref"
    assert out["artifact"]["bytes"] == os.path.getsize(artifact)
    assert {"graph", "weights"} <= {s["name"] for s in out["artifact"]["sections"]}
    assert out["artifact"]["source"]["name"] == "tiny_cnn.onnx"
    r = kiln("print", TINY, "--json", "--format", "dot", check=False)
    assert r.returncode != 0 and "excludes" in r.stderr


def test_ops_json_lists_conv_with_its_opset_range():
    out = kiln_json("ops", "--json")
    assert out["count"] == len(out["ops"]) > 100
    conv = next(o for o in out["ops"] if o["op"] == "Conv" and o["domain"] == "ai.onnx")
    assert conv["first_opset"] == 1 and conv["last_opset"] >= 22 and conv["family"] == "nn"
    text = kiln("ops").stdout
    assert re.search(rf"^Conv +{conv['first_opset']}-{conv['last_opset']} +nn", text, re.M)


def test_pipeline_json_run_bench_and_ops(tmp_path):
    for label in (3, 7):
        folder = tmp_path / "images" / str(label)
        folder.mkdir(parents=True)
        for f in os.listdir(IMAGES):
            if f.endswith(f"_label{label}.png"):
                shutil.copy(os.path.join(IMAGES, f), folder / f)
    pipeline = tmp_path / "p.json"
    pipeline.write_text(json.dumps({
        "batch_size": 2,
        "operators": [
            {"op": "readers.file", "args": {"file_root": str(tmp_path / "images")}},
            {"op": "decoders.image", "args": {"output_type": "GRAY"}},
            {"op": "resize", "args": {"resize_x": 8, "resize_y": 8}},
        ],
        "outputs": ["images", "label"]}))
    out = kiln_json("pipeline", "run", pipeline, "--json")
    # 1 three and 3 sevens: batches of 2, 2.
    assert out["images"] == 4 and out["batch_count"] == 2 and out["bad_samples"] == []
    first = out["batches"][0]
    assert first["samples"] == 2 and first["paths"][0].endswith("03_label3.png")
    shapes = {o["name"].split("@")[0]: o["shape"] for o in first["outputs"]}
    assert shapes == {"images": [2, 8, 8, 1], "label": [2]}
    bench = kiln_json("pipeline", "bench", pipeline, "--epochs", 2, "--threads", 1, "--json")
    assert bench["tool"] == "kiln pipeline bench" and len(bench["epochs"]) == 2
    assert all(e["images"] == 4 for e in bench["epochs"]) and bench["images_per_s"] > 0
    to_file = tmp_path / "bench.json"
    r = kiln("pipeline", "bench", pipeline, "--epochs", 1, "--json", to_file)
    assert "images/s" in r.stdout and json.loads(to_file.read_text())["epochs"][0]["images"] == 4
    ops = kiln_json("pipeline", "ops", "--json")["operators"]
    decode = next(o for o in ops if o["name"] == "decoders.image")
    output_type = next(a for a in decode["args"] if a["name"] == "output_type")
    assert output_type["type"] == "string" and output_type["default"] == "RGB"


def test_devices_json_and_the_default_target():
    out = kiln_json("devices", "--json")
    assert out["cpu"]["threads"] >= 1 and "ref" in out["targets"]
    assert out["default_target"] == default_target() and out["default_target_from"] == "default"
    if not out["gpus"]:
        assert out["no_gpu_reason"]
    env = kiln_json("devices", "--json", env={"KILN_TARGET": "ref"})
    assert env["default_target"] == "ref" and env["default_target_from"] == "KILN_TARGET"
    bad = kiln_json("devices", "--json", env={"KILN_TARGET": "tpu"})
    assert bad["default_target"] is None and "KILN_TARGET=tpu" in bad["default_target_error"]


def test_env_json_lists_kiln_target():
    out = kiln_json("env", "--json", env={"KILN_TARGET": "ref"})
    [flag] = [f for f in out["flags"] if f["variable"] == "KILN_TARGET"]
    assert flag == {"variable": "KILN_TARGET", "component": "cli", "value": "ref",
                    "default": "cpu", "set": True, "description": flag["description"]}
    assert "--target" in flag["description"]


def test_loadgen_json_on_an_in_process_server():
    out = kiln_json("loadgen", "--protocol", "native", "--repository",
                    os.path.join(ROOT, "examples", "repository"), "--model", "digits",
                    "--concurrency", 1, "--duration", 1, "--warmup", 0, "--json")
    [level] = out["levels"]
    assert out["model"] == "digits" and out["protocol"] == "native"
    assert level["requests"] > 0 and level["failures"] == 0 and level["errors"] == []
    assert level["server"]["inferences"] >= level["requests"]


@pytest.mark.parametrize("command", [
    ["run", DIGITS, "--input-shape", "image=1x1x8x8", "--json"],
    ["verify", DIGITS, "--input-shape", "image=1x1x8x8", "--json"],
    ["perf", DIGITS, "--batch", "1", "--iterations", "1", "--profile-runs", "0", "--json"],
    ["print", DIGITS, "--optimized", "--json"],
    ["compile", DIGITS, "--batch", "1", "-o", "{tmp}/d.kiln", "--json"],
])
def test_every_command_takes_its_target_from_flag_then_environment(command, tmp_path):
    command = [c.replace("{tmp}", str(tmp_path)) for c in command]

    def target_of(out):
        return out.get("target", out.get("optimized_for"))

    assert target_of(kiln_json(*command)) == default_target()
    assert target_of(kiln_json(*command, env={"KILN_TARGET": "ref"})) == "ref"
    assert target_of(kiln_json(*command, "--target", default_target(),
                               env={"KILN_TARGET": "ref"})) == default_target()
    bad_env = kiln(*command, env={"KILN_TARGET": "tpu"}, check=False)
    assert bad_env.returncode == 1 and bad_env.stdout == ""
    assert re.fullmatch(r'kiln: KILN_TARGET=tpu: unknown target "tpu"; this build has: ref.*\n',
                        bad_env.stderr)
    bad_flag = kiln(*command, "--target", "tpu", check=False)
    assert bad_flag.returncode == 1
    assert bad_flag.stderr.startswith('kiln: --target tpu: unknown target "tpu"; this build has: ')


def test_log_level_goes_before_or_after_the_subcommand_and_overrides_the_environment(tmp_path):
    cache = {"KILN_CACHE_DIR": str(tmp_path / "cache")}
    args = ["run", DIGITS, "--input-shape", "image=1x1x8x8", "--json"]
    for r in (kiln("--log-level", "info", *args, env=cache),
              kiln(*args, "--log-level", "info", env=cache)):
        assert "kiln info:" in r.stderr  # the compile cache logs its misses and hits at info
        assert json.loads(r.stdout)["outputs"][0]["name"] == "logits"  # logs stay off stdout
    quiet = kiln("--log-level", "off", *args, env={**cache, "KILN_LOG_LEVEL": "info"})
    assert quiet.stderr == ""
    loud = kiln(*args, env={**cache, "KILN_LOG_LEVEL": "info"})
    assert "kiln info:" in loud.stderr
    bad = kiln("--log-level", "verbose", "ops", check=False)
    assert bad.returncode != 0 and bad.stdout == ""
    assert 'unknown log level "verbose"; expected one of trace, debug, info, warn' in bad.stderr
    bad_env = kiln("ops", env={"KILN_LOG_LEVEL": "loud"}, check=False)
    assert bad_env.returncode == 1 and bad_env.stdout == ""
    assert bad_env.stderr.startswith(
        'kiln: KILN_LOG_LEVEL=loud: unknown log level "loud"; expected one of trace, debug, info')
    # --log-level overrides the variable, a bad one too.
    assert kiln("ops", "--log-level", "error", env={"KILN_LOG_LEVEL": "loud"}).returncode == 0


def test_json_before_the_subcommand_or_on_one_without_it_is_a_clear_error():
    before = kiln("--json", "ops", check=False)
    assert before.returncode == 1 and before.stdout == ""
    assert before.stderr == "kiln: --json goes after the subcommand: kiln ops ... --json\n"
    serve = kiln("serve", "--json", "--repository", os.path.join(ROOT, "examples", "repository"),
                 check=False)
    assert serve.returncode == 1 and "kiln serve has no JSON output" in serve.stderr


def test_version_reports_the_build():
    text = kiln("--version").stdout
    project = re.search(r"project\(kiln VERSION (\S+)", open(os.path.join(ROOT, "CMakeLists.txt"))
                        .read()).group(1)
    assert text.startswith(f"kiln {project}\n")
    out = kiln_json("--version", "--json")
    assert out["version"] == project
    assert set(out) == {"version", "git_commit", "git_dirty", "build_type", "compiler", "cuda",
                        "cuda_toolkit", "onednn", "targets", "usable_targets"}
    assert re.fullmatch(r"(gcc|clang) \d+\.\d+\.\d+", out["compiler"])
    assert out["targets"][0] == "ref" and set(out["usable_targets"]) == set(targets())
    assert (out["cuda_toolkit"] is None) == (not out["cuda"])
    assert (out["onednn"] is not None) == ("cpu" in out["targets"])
    for key in ("git_commit", "build_type", "compiler", "onednn"):
        if out[key]:
            assert f": {out[key]}" in text or out[key] in text
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0 and os.path.exists(os.path.join(ROOT, ".git")):
        # The build wrote the commit it was built from; a build after a new commit rewrites it.
        assert out["git_commit"] == head.stdout.strip()
    else:
        assert out["git_commit"] == "unknown"
