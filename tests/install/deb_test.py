# SPDX-License-Identifier: Apache-2.0
"""The .deb packages as a fresh machine gets them: builds them with CPack from a kiln build,
checks their names, contents and Debian dependencies, unpacks them into a temporary root
(dpkg-deb -x: what `dpkg -i` would lay out, without touching this machine), and runs the
unpacked `kiln serve` on the unpacked example repository, made read-only, with LD_LIBRARY_PATH
and PYTHONPATH pointing only into that root. It must answer health, metadata and inference over
HTTP (the held-out digits: >= 90% right) and gRPC (the unpacked python3-kiln's client), write
nothing into the repository, and drain and exit 0 on SIGTERM within 10 s.

usage: deb_test.py BUILD_DIR
"""

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(SOURCE, "examples")
# What NVIDIA's apt repository packages (CUDA, cuDNN): not Debian's, so not installed here.
NVIDIA = re.compile(r"^(cuda-|libcudnn)")


def fail(message):
    sys.exit(f"FAIL: {message}")


def run(*args, **kwargs):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True, **kwargs).stdout


def depends(deb):
    """The package names of a .deb's Depends field (alternatives and versions dropped)."""
    field = run("dpkg-deb", "-f", deb, "Depends")
    return [re.split(r"[ (]", d.strip().split("|")[0].strip())[0] for d in field.split(",")
            if d.strip()]


def check_packages(packages):
    """The three packages, each with its files, and Depends naming real Debian packages."""
    debs = {run("dpkg-deb", "-f", os.path.join(packages, f), "Package").strip():
            os.path.join(packages, f) for f in os.listdir(packages) if f.endswith(".deb")}
    if sorted(debs) != ["kiln", "kiln-dev", "python3-kiln"]:
        fail(f"expected the packages kiln, kiln-dev and python3-kiln, found {sorted(debs)}")
    expected = {
        "kiln": ["./usr/bin/kiln", "./usr/share/kiln/examples/repository/digits/config.toml"],
        "kiln-dev": ["./usr/include/kiln/compiler/targets/target.h",
                     "./usr/lib/cmake/kiln/kilnConfig.cmake", "./usr/lib/libkiln_compiler.a",
                     "./usr/lib/pkgconfig/kiln-compiler.pc"],
        "python3-kiln": ["./usr/lib/python3/dist-packages/kiln/__init__.py",
                         "./usr/lib/python3/dist-packages/kiln/pipeline/fn.pyi"],
    }
    for name, files in expected.items():
        listing = run("dpkg-deb", "-c", debs[name])
        for f in files:
            if f not in listing:
                fail(f"{name} has no {f}")
    # dpkg-shlibdeps found what the binaries link; every name is a package this machine has, or
    # one that an installed package provides.
    installed = set()
    for line in run("dpkg-query", "-W", "-f", "${Package},${Provides}\\n").splitlines():
        installed.update(re.split(r"[ (]", p.strip())[0] for p in line.split(",") if p.strip())
    for name, deb in debs.items():
        names = depends(deb)
        print(f"{name}: Depends {', '.join(names)}")
        for dep in names:
            if dep not in installed and not NVIDIA.match(dep):
                fail(f"{name} depends on {dep}, which is not a package installed here")
    for name in ["kiln", "python3-kiln"]:
        for lib in ["libc6", "libstdc++6", "libprotobuf32", "libdnnl2"]:
            if lib not in depends(debs[name]):
                fail(f"{name} does not depend on {lib} (dpkg-shlibdeps did not run?)")
    if "python3-numpy" not in depends(debs["python3-kiln"]):
        fail("python3-kiln does not depend on python3-numpy")
    for lib in ["libonnx-dev", "libprotobuf-dev", "libfmt-dev"]:
        if lib not in depends(debs["kiln-dev"]):
            fail(f"kiln-dev does not depend on {lib}")
    return debs


def tree_state(folder):
    """Every path under `folder` with its size and modification time."""
    state = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            state[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns)
    return state


def read_pgm(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, width, height, maxval = data.split(maxsplit=4)[:4]
    n = int(width) * int(height)
    return [b / int(maxval) for b in data[len(data) - n:]], [1, 1, int(height), int(width)]


def digits():
    for line in open(os.path.join(EXAMPLES, "digit_images", "labels.txt")):
        if line.strip() and not line.startswith("#"):
            name, label = line.split()
            yield name, int(label)


def http(url, body=None):
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
        return response.status, text


def main():
    build = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="kiln-deb.")
    server = None
    try:
        packages = os.path.join(tmp, "packages")
        print("== cpack -G DEB")
        run("cpack", "-G", "DEB", "-B", packages, cwd=build)
        debs = check_packages(packages)

        root = os.path.join(tmp, "root")
        for deb in debs.values():
            run("dpkg-deb", "-x", deb, root)
        kiln = os.path.join(root, "usr", "bin", "kiln")
        dynamic = run("readelf", "-d", kiln)
        if build in dynamic or SOURCE in dynamic:
            fail(f"the packaged kiln's dynamic section names the build or source tree:\n{dynamic}")

        # The repository as KServe mounts /mnt/models: read-only.
        models = os.path.join(tmp, "models")
        shutil.copytree(os.path.join(root, "usr", "share", "kiln", "examples", "repository"),
                        models)
        for dirpath, dirnames, filenames in os.walk(models):
            for name in filenames + dirnames:
                path = os.path.join(dirpath, name)
                os.chmod(path, os.stat(path).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        os.chmod(models, 0o555)
        before = tree_state(models)

        env = {"PATH": "/usr/bin:/bin", "HOME": os.path.join(tmp, "home"),
               "LD_LIBRARY_PATH": os.path.join(root, "usr", "lib"),
               "KILN_CACHE_DIR": os.path.join(tmp, "cache")}
        log_path = os.path.join(tmp, "serve.log")
        log = open(log_path, "w")
        print(f"== {kiln} serve --model-repository {models}")
        server = subprocess.Popen([kiln, "serve", "--model-repository", models, "--host",
                                   "127.0.0.1", "--http-port", "0", "--grpc-port", "0",
                                   "--threads", "2"], stdout=log, stderr=subprocess.STDOUT,
                                  env=env)
        http_port = grpc_port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (http_port and grpc_port):
            text = open(log_path).read()
            m = re.search(r"listening on http://[^:]+:(\d+)", text)
            g = re.search(r"listening on grpc://[^:]+:(\d+)", text)
            http_port, grpc_port = m and m.group(1), g and g.group(1)
            if server.poll() is not None:
                fail(f"kiln serve exited with {server.returncode}:\n{text}")
            time.sleep(0.1)
        if not (http_port and grpc_port):
            fail(f"kiln serve did not listen within 120 s:\n{open(log_path).read()}")
        url = f"http://127.0.0.1:{http_port}"

        for path in ["/v2/health/live", "/v2/health/ready", "/v2/models/digits/ready"]:
            status, _ = http(url + path)
            if status != 200:
                fail(f"GET {path} answered {status}")
        _, text = http(url + "/v2/models/digits")
        meta = json.loads(text)
        if meta["inputs"][0]["name"] != "image" or meta["outputs"][0]["name"] != "logits":
            fail(f"unexpected metadata of digits: {text}")

        right = total = 0
        for name, label in digits():
            data, shape = read_pgm(os.path.join(EXAMPLES, "digit_images", name))
            _, text = http(url + "/v2/models/digits/infer", {"inputs": [
                {"name": "image", "shape": shape, "datatype": "FP32", "data": data}]})
            scores = json.loads(text)["outputs"][0]["data"]
            right += scores.index(max(scores)) == label
            total += 1
        print(f"HTTP: {right}/{total} digits right")
        if right * 10 < total * 9:
            fail("fewer than 90% of the digits are right over HTTP")

        # gRPC with the unpacked python3-kiln (its extension and generated messages).
        client = subprocess.run(
            ["/usr/bin/python3", "-c", GRPC_CLIENT, f"127.0.0.1:{grpc_port}", EXAMPLES],
            env={**env, "PYTHONPATH": os.path.join(root, "usr", "lib", "python3", "dist-packages"),
                 "PYTHONNOUSERSITE": "1"},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp)
        print(client.stdout.strip())
        if client.returncode != 0:
            fail("the gRPC client of the unpacked python3-kiln failed")

        _, metrics = http(url + "/metrics")
        if 'model="digits"' not in metrics:
            fail("/metrics has no series for the model digits")

        start = time.monotonic()
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("kiln serve did not exit within 10 s of SIGTERM")
        server = None
        print(f"SIGTERM: exited {code} after {time.monotonic() - start:.2f} s")
        if code != 0:
            fail(f"kiln serve exited {code} on SIGTERM:\n{open(log_path).read()}")
        if tree_state(models) != before:
            fail("kiln serve changed the (read-only) model repository")
        if not os.listdir(os.path.join(tmp, "cache")):
            fail("kiln serve cached no compiled model in KILN_CACHE_DIR")
        print("PASS")
    finally:
        if server is not None:
            server.kill()
            server.wait()
        for dirpath, dirnames, _ in os.walk(tmp):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(tmp, ignore_errors=True)


# Runs in the unpacked python3-kiln: kiln must come from there; classifies the digits over gRPC.
GRPC_CLIENT = r"""
import os, sys
import numpy as np
import kiln
from kiln.client import GrpcClient
root = os.environ["PYTHONPATH"]
if not os.path.realpath(kiln.__file__).startswith(os.path.realpath(root)):
    sys.exit(f"kiln was imported from {kiln.__file__}, not from {root}")
url, examples = sys.argv[1], sys.argv[2]
client = GrpcClient(url)
client.wait_until_server_ready()
right = total = 0
for line in open(os.path.join(examples, "digit_images", "labels.txt")):
    if not line.strip() or line.startswith("#"):
        continue
    name, label = line.split()
    data = open(os.path.join(examples, "digit_images", name), "rb").read()
    width, height, maxval = (int(v) for v in data.split(maxsplit=4)[1:4])
    pixels = np.frombuffer(data[len(data) - width * height:], np.uint8).astype(np.float32) / maxval
    image = pixels.reshape(1, 1, height, width)
    scores = client.model_infer("digits", {"image": image}).outputs["logits"]
    right += int(np.argmax(scores)) == int(label)
    total += 1
print(f"gRPC (python3-kiln {kiln.__version__}): {right}/{total} digits right")
sys.exit(0 if right * 10 >= total * 9 else 1)
"""

if __name__ == "__main__":
    main()
