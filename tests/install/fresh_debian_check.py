# SPDX-License-Identifier: Apache-2.0
"""By hand, not in ctest (it downloads ~250 MB of Debian packages): the runtime stage of
deploy/container/Containerfile carried out on a fresh Debian 12 root instead of an image.

Makes a minimal Debian 12 root with debootstrap (as debian:12-slim is), then follows the
Containerfile's last stage in it: its COPY of the kiln .deb, its RUN lines in a chroot (apt must
find every dependency of the package in Debian), its ENV, USER and WORKDIR; then runs its
ENTRYPOINT and CMD (loopback, free ports) as that user, runs its HEALTHCHECK inside the root,
classifies the held-out digits over HTTP from outside (>= 90% right), and checks that SIGTERM ends
the server with status 0. With --dev it then installs kiln-dev (with cmake, g++ and ninja) in the
root and builds and runs tests/install/consumer there with find_package(kiln): kiln-dev's
dependencies must be complete. Needs root, debootstrap and the Debian mirror; mounts stay private
(unshare).

usage: fresh_debian_check.py DEB_DIR [--root DIR] [--dev]
  DEB_DIR: `cpack -G DEB -B DEB_DIR` of a build without the cuda target (the CPU image's build);
  --root: where the Debian root goes (reused when it is there; default: a new temporary folder)
"""

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
CONTAINERFILE = os.path.join(SOURCE, "deploy", "container", "Containerfile")


def fail(message):
    sys.exit(f"FAIL: {message}")


def last_stage(path):
    """The instructions after the Containerfile's last FROM, continuation lines joined."""
    text = re.sub(r"\\\n", " ", open(path).read())
    stage = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stage = []
        else:
            stage.append((word.upper(), rest.strip()))
    return stage


def chroot(root, command, user=None, env=None, **kwargs):
    args = ["chroot"] + ([f"--userspec={user}"] if user else []) + [root]
    return subprocess.run(args + ["/usr/bin/env", "-i"] +
                          [f"{k}={v}" for k, v in (env or {}).items()] + command, **kwargs)


def loopback_and_free_ports(args):
    out = []
    for i, a in enumerate(args):
        previous = args[i - 1] if i else ""
        out.append({"--http-port": "0", "--grpc-port": "0", "--host": "127.0.0.1"}.get(previous, a))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("debs")
    parser.add_argument("--root")
    parser.add_argument("--dev", action="store_true")
    options = parser.parse_args()
    if os.getuid() != 0:
        fail("run as root (debootstrap, chroot)")
    if not os.environ.get("KILN_FRESH_DEBIAN_UNSHARED"):
        # Mounts made from here on are private to this process tree.
        os.execvpe("unshare", ["unshare", "--mount", "--fork", sys.executable] + sys.argv,
                   {**os.environ, "KILN_FRESH_DEBIAN_UNSHARED": "1"})
    debs = os.path.abspath(options.debs)
    root = options.root or tempfile.mkdtemp(prefix="kiln-debian12.")
    if not os.path.exists(os.path.join(root, "usr", "bin", "apt-get")):
        print(f"== debootstrap --variant=minbase bookworm {root}", flush=True)
        result = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root,
                                 "http://deb.debian.org/debian"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            fail(f"debootstrap:\n{result.stdout[-3000:]}")
    shutil.copy("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
    subprocess.run(["mount", "-t", "proc", "proc", os.path.join(root, "proc")], check=True)

    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    user, workdir, entrypoint, cmd, health = None, "/", None, None, None
    for word, rest in last_stage(CONTAINERFILE):
        if word == "COPY":
            source, destination = rest.split()[-2:]
            if not source.startswith("/packages/kiln_"):
                fail(f"Containerfile: unexpected COPY {rest}")
            for deb in glob.glob(os.path.join(debs, os.path.basename(source))):
                shutil.copy(deb, os.path.join(root, destination.lstrip("/")))
        elif word == "RUN":
            print(f"== RUN {rest[:100]}...", flush=True)
            result = chroot(root, ["/bin/sh", "-c", rest], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
            if result.returncode != 0:
                fail(f"RUN exited {result.returncode}:\n{result.stdout[-3000:]}")
            installed = sorted(set(re.findall(r"^Setting up ([^ ]+)", result.stdout, re.M)))
            if installed:
                print(f"   apt set up {len(installed)} packages, kiln among them: "
                      f"{'kiln' in installed}")
        elif word == "ENV":
            env.update(dict(re.findall(r"(\w+)=(\S+)", rest)))
        elif word == "USER":
            user = rest
        elif word == "WORKDIR":
            workdir = rest
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
        elif word == "HEALTHCHECK":
            health = json.loads(rest[rest.index("CMD ") + 4:])
    if not (user and entrypoint and cmd and health):
        fail("the Containerfile's last stage needs USER, ENTRYPOINT, CMD and HEALTHCHECK")

    command = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', workdir] + entrypoint + \
        loopback_and_free_ports(cmd)
    print(f"== as user {user}: {' '.join(entrypoint + cmd)}", flush=True)
    log_path = os.path.join(root, "tmp", "kiln-serve.log")
    with open(log_path, "w") as log:
        server = subprocess.Popen(["chroot", f"--userspec={user}", root, "/usr/bin/env", "-i"] +
                                  [f"{k}={v}" for k, v in env.items()] + ["HOME=" + workdir] +
                                  command, stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.monotonic() + 300
        while port is None and time.monotonic() < deadline:
            m = re.search(r"listening on http://[^:]+:(\d+)", open(log_path).read())
            port = m and m.group(1)
            if server.poll() is not None:
                fail(f"kiln serve exited {server.returncode}:\n{open(log_path).read()}")
            time.sleep(0.1)
        if port is None:
            fail("kiln serve did not listen within 300 s")
        print(open(log_path).read().strip())
        probe = chroot(root, [p.replace("/8000", f"/{port}") for p in health], user=user,
                       env=env, timeout=10)
        if probe.returncode != 0:
            fail("the HEALTHCHECK failed inside the root")
        print("HEALTHCHECK (inside the root): passed")
        right = total = 0
        images = os.path.join(SOURCE, "examples", "digit_images")
        for line in open(os.path.join(images, "labels.txt")):
            if not line.strip() or line.startswith("#"):
                continue
            name, label = line.split()
            data = open(os.path.join(images, name), "rb").read()
            width, height, maxval = (int(v) for v in data.split(maxsplit=4)[1:4])
            pixels = [b / maxval for b in data[len(data) - width * height:]]
            body = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, height, width],
                                           "datatype": "FP32", "data": pixels}]}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/digits/infer",
                                             data=body,
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                scores = json.loads(response.read())["outputs"][0]["data"]
            right += scores.index(max(scores)) == int(label)
            total += 1
        print(f"HTTP: {right}/{total} digits right")
        if right * 10 < total * 9:
            fail("fewer than 90% of the digits are right")
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
        if code != 0:
            fail(f"kiln serve exited {code} on SIGTERM:\n{open(log_path).read()}")
        print("SIGTERM: exit 0")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    if options.dev:
        check_dev(root, debs, env)
    print(f"PASS (root: {root})")


def check_dev(root, debs, env):
    """kiln-dev on the fresh root: a consumer built there with find_package(kiln) runs."""
    (deb,) = glob.glob(os.path.join(debs, "kiln-dev_*.deb"))
    shutil.copy(deb, os.path.join(root, "tmp"))
    for folder in ["tests/install/consumer", "examples"]:
        shutil.copytree(os.path.join(SOURCE, folder),
                        os.path.join(root, "tmp", "kiln-src", os.path.basename(folder)),
                        dirs_exist_ok=True)
    print("== apt-get install kiln-dev cmake g++ ninja-build; the consumer with find_package(kiln)",
          flush=True)
    script = (f"apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
              f"--no-install-recommends /tmp/{os.path.basename(deb)} cmake g++ ninja-build && "
              "cmake -S /tmp/kiln-src/consumer -B /tmp/kiln-consumer -G Ninja "
              "-DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/kiln-consumer && "
              "KILN_CACHE_DIR=/tmp/kiln-consumer-cache /tmp/kiln-consumer/kiln_consumer "
              "/tmp/kiln-src/examples")
    result = chroot(root, ["/bin/sh", "-c", script], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        fail(f"kiln-dev on the fresh root:\n{result.stdout[-4000:]}")
    print("\n".join(result.stdout.strip().splitlines()[-2:]))


if __name__ == "__main__":
    main()
