#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A soak of `kiln serve` (issue 28).

`kiln loadgen` keeps the echo model busy over HTTP and gRPC while this script mixes in model
loads and unloads, worker loads and unloads, bad requests and clients that disconnect halfway
through a body. At the end every loadgen request must have been answered successfully (0 lost
responses), the server's RSS must be flat (the last third of the samples no more than 32 MB over
the first third; --max-rss-growth-mb), and SIGTERM must exit 0.

  tests/e2e/soak.py build/ci/tools/kiln [--seconds 20]     (ctest e2e.soak: 20 s)
  tests/e2e/soak.py build/ci/tools/kiln --seconds 1800     (the long version, by hand)
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1.0


def post(port, path, body, close_early=False):
    data = body.encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()
        if close_early:  # a client that goes away halfway through its body
            s.sendall(head + data[:len(data) // 2])
            return "disconnected"
        s.sendall(head + data)
        return s.recv(65536).split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        return f"client error {e!r}"
    finally:
        s.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("kiln")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--max-rss-growth-mb", type=float, default=32,
                        help="how much the median RSS of the last third of the run may exceed "
                             "the first third's (default 32; ASan's allocator needs more)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="kiln_soak_")
    repo = os.path.join(root, "repo")
    for name in ("echo", "spare"):
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.toml"), "w") as f:
            f.write('backend = "echo"\nmax_batch_size = 8\ninstances = 2\n'
                    '[dynamic_batching]\nmax_queue_delay_microseconds = 200\n'
                    '[[inputs]]\nname = "x"\ndatatype = "FP32"\nshape = [64]\n')
    os.environ["KILN_CACHE_DIR"] = os.path.join(root, "cache")
    log_path = os.path.join(root, "serve.log")
    log = open(log_path, "w+")
    server = subprocess.Popen([args.kiln, "serve", "--repository", repo, "--host", "127.0.0.1",
                               "--http-port", "0", "--grpc-port", "0", "--threads", "2",
                               "--model-control-mode", "explicit"],
                              stdout=log, stderr=subprocess.STDOUT)
    ports = {}
    for _ in range(600):
        log.seek(0)
        ports = dict(re.findall(r"listening on (http|grpc)://[^:]*:(\d+)", log.read()))
        if len(ports) == 2 or server.poll() is not None:
            break
        time.sleep(0.1)
    if len(ports) != 2:
        print("soak: kiln serve did not start\n" + open(log_path).read())
        return 1
    http, grpc = int(ports["http"]), int(ports["grpc"])
    failures = []

    loadgens = []
    for protocol, url in (("http", f"http://127.0.0.1:{http}"), ("grpc", f"127.0.0.1:{grpc}")):
        out = os.path.join(root, f"loadgen_{protocol}.json")
        loadgens.append((protocol, out, subprocess.Popen(
            [args.kiln, "loadgen", "--protocol", protocol, "--url", url, "--model", "echo",
             "--concurrency", "4", "--warmup", "0",
             "--duration", str(args.seconds), "--json", out],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)))

    samples = []
    stop = threading.Event()

    def sample():
        while not stop.wait(0.25):
            samples.append(rss_mb(server.pid))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    # The churn, until the loadgens finish.
    counts = {"load": 0, "unload": 0, "worker": 0, "bad": 0, "disconnect": 0}
    tensor = json.dumps({"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
                                     "data": [0.5] * 64}]})
    while any(p.poll() is None for _, _, p in loadgens):
        for path, key in (("/v2/repository/models/spare/unload", "unload"),
                          ("/v2/repository/models/spare/load", "load")):
            answer = post(http, path, "{}")
            counts[key] += 1
            if "200" not in answer:
                failures.append(f"{path}: {answer}")
        answer = post(http, "/v2/workers/echo/load", '{"max_batch_size": 3}')
        counts["worker"] += 1
        if "200" not in answer:
            failures.append(f"worker load: {answer}")
        else:
            post(http, "/v2/workers/echo-1/unload", "{}")
        for body in ('{"inputs":[', '{"inputs":[{"name":"x","shape":[2],"datatype":"FP32",'
                     '"data":[1]}]}', "\xff\xfe"):
            answer = post(http, "/v2/models/echo/infer", body)
            counts["bad"] += 1
            if "400" not in answer:
                failures.append(f"bad request answered {answer}")
        post(http, "/v2/models/spare/infer", tensor, close_early=True)
        counts["disconnect"] += 1
        time.sleep(0.05)
    stop.set()
    sampler.join()

    for protocol, out, p in loadgens:
        try:
            report = json.load(open(out))
        except (OSError, ValueError) as e:
            failures.append(f"loadgen {protocol}: no report ({e!r}), exit {p.returncode}")
            continue
        levels = report if isinstance(report, list) else report.get("levels", [report])
        requests = sum(l.get("requests", 0) for l in levels)
        lost = sum(l.get("failures", 0) for l in levels)
        rate = sum(l.get("requests_per_s", 0) for l in levels)
        print(f"loadgen {protocol}: {requests} requests, {lost} failed, {rate:.0f}/s")
        if requests == 0 or lost != 0:
            failures.append(f"loadgen {protocol}: {requests} requests, {lost} failed: "
                            f"{[l.get('errors') for l in levels]}")
    if len(samples) < 3:
        failures.append(f"only {len(samples)} RSS samples: the loadgens ended at once")
        samples = samples * 3 or [0.0] * 3
    third = max(1, len(samples) // 3)
    first, last = statistics.median(samples[:third]), statistics.median(samples[-third:])
    print(f"churn: {counts}; RSS median first third {first:.0f} MB, last third {last:.0f} MB, "
          f"max {max(samples):.0f} MB ({len(samples)} samples)")
    if last - first > args.max_rss_growth_mb:
        failures.append(f"RSS grew from {first:.0f} MB to {last:.0f} MB")
    server.terminate()
    code = server.wait(timeout=60)
    if code != 0:
        failures.append(f"kiln serve exited {code} on SIGTERM")
    output = open(log_path).read()
    shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("soak: FAILED\n  " + "\n  ".join(failures[:20]))
        print(output[-2000:])
        return 1
    print("soak: held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
