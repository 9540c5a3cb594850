#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A hostile client against a real `kiln serve` (issue 28).

Starts `kiln serve` on a fresh repository (loopback, free ports, under an open-file limit) and
replays every defect of issue 28 plus slowloris, fd exhaustion and oversized JSON, checking after
each that the server is alive and its resident set stays bounded. Exits 0 when it held, 1 with
the failures listed otherwise. Figures (RSS, CPU seconds, log size) go to stdout.

  tests/e2e/hostile_client.py build/ci/tools/kiln [--rounds N] [--rss-limit-mb MB]

ctest runs it as e2e.hostile_client, and as asan.e2e.hostile_client against the ASan+UBSan build
(whose shadow memory and redzones need a higher RSS bound); --rounds repeats the whole replay (a
longer soak by hand).
"""
import argparse
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

RSS_LIMIT_MB = 400  # what the server may hold at any check, models loaded (it idles at ~40 MB)
FD_LIMIT = 512      # the open-file limit the server runs under


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, kiln, repo, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen(
            ["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", kiln, "serve", "--repository", repo,
             "--host", "127.0.0.1", "--http-port", "0", "--grpc-port", "0", "--threads", "2",
             "--idle-timeout-secs", "3", "--body-timeout-secs", "3", "--max-body-mib", "64",
             "--model-control-mode", "explicit"],
            stdout=self.log, stderr=subprocess.STDOUT)
        ports = {}
        for _ in range(600):
            ports = dict(re.findall(r"listening on (http|grpc)://[^:]*:(\d+)", self.output()))
            if len(ports) == 2 or self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if len(ports) != 2:
            raise RuntimeError("kiln serve did not start:\n" + self.output())
        self.port = int(ports["http"])
        # prlimit execs kiln, so the pid is the server's.
        self.pid = self.proc.pid

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        if self.proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/health/live",
                                        timeout=10) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=60)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def exchange(port, data, timeout=10):
    """Sends raw bytes and returns the response's status line (or '' if none came)."""
    s = connect(port)
    s.settimeout(timeout)
    try:
        s.sendall(data)
        reply = s.recv(65536)
    except OSError:
        reply = b""
    finally:
        s.close()
    return reply.split(b"\r\n", 1)[0].decode(errors="replace")


def post(port, path, body, headers="", timeout=10):
    data = body.encode() if isinstance(body, str) else body
    return exchange(port, (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}"
                           f"Content-Length: {len(data)}\r\n\r\n").encode() + data, timeout)


def attacks(port, work):
    """(name, function returning the status line or a note) for every attack."""
    def trailer():
        return exchange(port, b"POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                        b"chunked\r\n\r\n2\r\n{}\r\n0\r\nX: " + b"a" * 70000 + b"\r\n\r\n")

    def instances():
        return post(port, "/v2/workers/echo/load", '{"instances":40000}')

    def declared_body():
        socks = []
        for _ in range(8):
            s = connect(port)
            s.sendall(b"POST /v2/models/echo/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 67108864\r\n\r\n{")
            socks.append(s)
        time.sleep(0.5)
        rss = rss_mb(server_pid[0])
        for s in socks:
            s.close()
        return f"8 connections declared 64 MiB and sent 1 byte: RSS {rss:.0f} MB while open"

    def outside_load():
        answers = [post(port, "/v2/workers/compiler/load", json.dumps({"model": p}))
                   for p in ("/etc/passwd", "/nonexistent.onnx", "../../../etc/passwd")]
        answers.append(post(port, "/v2/repository/models/outside/load", "{}"))
        answers.append(post(port, "/v2/repository/models/..%2F..%2Fetc/load", "{}"))
        return " | ".join(answers)

    def fd_exhaustion():
        socks = []
        for _ in range(FD_LIMIT + 200):
            try:
                socks.append(connect(port))
            except OSError:
                break
        cpu0 = cpu_seconds(server_pid[0])
        time.sleep(2)
        cpu = cpu_seconds(server_pid[0]) - cpu0
        for s in socks:
            s.close()
        return f"{len(socks)} idle connections over an fd limit of {FD_LIMIT}: {cpu:.2f} CPU-s in 2 s"

    def oversized_json():
        n = 6 << 20  # 6 M values, ~24 MB of JSON
        body = ('{"inputs":[{"name":"x","shape":[%d],"datatype":"FP32","data":[' % n +
                ",".join(["1.5"] * n) + "]}]}")
        status = post(port, "/v2/models/echo/infer", body, timeout=120)  # slow under ASan
        too_big = post(port, "/v2/models/echo/infer", "[" * (65 << 20))
        return f"{len(body) >> 20} MiB JSON: {status}; 65 MiB body: {too_big}"

    def bad_png():
        # The first half of a real PNG, sent with the binary tensor extension.
        images = os.path.join(work["source"], "examples", "digit_images")
        png = open(os.path.join(images, sorted(os.listdir(images))[0]), "rb").read()
        half = png[:len(png) // 2]
        element = len(half).to_bytes(4, "little") + half
        header = json.dumps({"inputs": [{
            "name": "image_bytes", "shape": [1], "datatype": "BYTES",
            "parameters": {"binary_data_size": len(element)}}]}).encode()
        return post(port, "/v2/models/digits_pipeline/infer", header + element,
                    f"Inference-Header-Content-Length: {len(header)}\r\n")

    def bad_utf8():
        return exchange(port, b"GET /v2/models/a%FF%FE/ready HTTP/1.1\r\nHost: x\r\n"
                        b"Connection: close\r\n\r\n")

    def slowloris():
        socks = []
        for _ in range(200):
            s = connect(port)
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\n")
            socks.append(s)
        end = time.time() + 5
        closed = 0
        while time.time() < end:
            for s in socks:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
            time.sleep(0.5)
        for s in socks:
            s.settimeout(0.2)
            try:
                closed += s.recv(1) == b""
            except ConnectionError:
                closed += 1
            except OSError:
                pass
            s.close()
        return f"200 slow headers for 5 s, idle timeout 3 s: {closed} closed by the server"

    def garbage():
        import random
        rng = random.Random(28)
        statuses = set()
        for i in range(500):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            head = [b"", b"POST /v2/models/echo/infer HTTP/1.1\r\n", b"GET / HTTP/1.1\r\n"][i % 3]
            statuses.add(exchange(port, head + junk, timeout=3)[:12])
        return f"500 random requests: {sorted(statuses)}"

    server_pid = [work["pid"]]
    return [
        ("1 chunked trailer of 70,000 bytes", trailer, lambda r: "431" in r),
        ("2 workers/echo/load with 40000 instances", instances, lambda r: "400" in r),
        ("3 declared-but-unsent 64 MiB bodies", declared_body,
         lambda r: float(re.search(r"RSS (\d+)", r).group(1)) < RSS_LIMIT_MB),
        ("4 loads outside the repository", outside_load,
         lambda r: all(("400" in a or "403" in a) for a in r.split(" | "))),
        ("5 fd exhaustion", fd_exhaustion,
         lambda r: float(re.search(r": ([\d.]+) CPU-s", r).group(1)) < 0.5),
        ("6 oversized JSON", oversized_json, lambda r: "200" in r and r.endswith("413 Payload Too Large")),
        ("7 truncated PNG", bad_png, lambda r: "400" in r),
        ("7 invalid UTF-8 in the URL", bad_utf8, lambda r: "404" in r),
        ("slowloris", slowloris, lambda r: ": 200 closed" in r),
        ("garbage", garbage, lambda r: "500" not in r.split(":", 1)[1]),
    ]


def main():
    global RSS_LIMIT_MB
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("kiln")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rss-limit-mb", type=float, default=RSS_LIMIT_MB,
                        help=f"the most RSS the server may hold (default {RSS_LIMIT_MB})")
    args = parser.parse_args()
    RSS_LIMIT_MB = args.rss_limit_mb
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, max(4096, resource.getrlimit(
        resource.RLIMIT_NOFILE)[1])))
    root = tempfile.mkdtemp(prefix="kiln_hostile_")
    repo = os.path.join(root, "repo")
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.makedirs(os.path.join(repo, "echo", "1"))
    with open(os.path.join(repo, "echo", "config.toml"), "w") as f:
        f.write('backend = "echo"\n')
    shutil.copytree(os.path.join(source, "examples", "repository", "digits_pipeline"),
                    os.path.join(repo, "digits_pipeline"),
                    ignore=shutil.ignore_patterns(".kiln-cache"))
    # A model folder that links outside the repository.
    os.makedirs(os.path.join(root, "outside", "1"))
    with open(os.path.join(root, "outside", "config.toml"), "w") as f:
        f.write('backend = "echo"\n')
    os.symlink(os.path.join(root, "outside"), os.path.join(repo, "outside"))
    env_cache = os.path.join(root, "cache")
    os.environ["KILN_CACHE_DIR"] = env_cache

    server = Server(args.kiln, repo, os.path.join(root, "serve.log"))
    failures = []
    peak = rss_mb(server.pid)
    # The peak between checks too: RSS sampled every 20 ms.
    sampled = [peak]
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            try:
                sampled[0] = max(sampled[0], rss_mb(server.pid))
            except OSError:
                return
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    print(f"kiln serve pid {server.pid}, http port {server.port}, RSS {peak:.0f} MB at start")
    for round_ in range(args.rounds):
        for name, attack, expect in attacks(server.port, {"pid": server.pid, "source": source}):
            t0 = time.time()
            try:
                result = attack()
            except Exception as e:  # noqa: BLE001 - report every failure, keep going
                result = f"client error: {e!r}"
            rss = rss_mb(server.pid)
            peak = max(peak, rss)
            alive = server.alive()
            try:
                held = expect(result)
            except (AttributeError, ValueError):
                held = False
            ok = alive and rss < RSS_LIMIT_MB and held
            print(f"[{'ok' if ok else 'FAIL'}] round {round_ + 1} {name}: {result} "
                  f"(RSS {rss:.0f} MB, {time.time() - t0:.1f} s)")
            if not ok:
                failures.append(f"{name}: alive={alive} rss={rss:.0f} MB result={result}")
    done.set()
    sampler.join()
    print(f"peak RSS sampled every 20 ms: {sampled[0]:.0f} MB")
    if sampled[0] > RSS_LIMIT_MB:
        failures.append(f"RSS peaked at {sampled[0]:.0f} MB")
    log_bytes = len(server.output())
    cpu = cpu_seconds(server.pid)
    print(f"peak RSS at checks {peak:.0f} MB; server CPU {cpu:.1f} s; log {log_bytes} bytes")
    if log_bytes > 200_000:
        failures.append(f"the log grew to {log_bytes} bytes")
    written = [p for p, _, files in os.walk(repo) for f in files
               if f not in ("config.toml", "pipeline.json")]
    if written or os.path.exists(os.path.join(root, "outside", "1", ".kiln-cache")):
        failures.append(f"files were written into the repository: {written}")
    code = server.stop()
    if code != 0:
        failures.append(f"kiln serve exited {code} on SIGTERM")
    log = server.output()
    shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("hostile_client: FAILED\n  " + "\n  ".join(failures))
        print(log[-3000:])
        return 1
    print("hostile_client: the server held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
