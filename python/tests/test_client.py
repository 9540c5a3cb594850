# SPDX-License-Identifier: Apache-2.0
# kiln.client against a real `kiln serve` (HTTP and gRPC): health, metadata, every dtype through
# the echo model, the digits model and the PNG -> class chain, async ordering, repository and
# worker calls, errors with their statuses, and amdinfer's camelCase names.
import glob
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

from conftest import ROOT
import kiln.client as kc

EXAMPLES = os.path.join(ROOT, "examples")
IMAGES = sorted(glob.glob(os.path.join(EXAMPLES, "digit_images", "*.png")))


def label_of(path):
    return int(re.search(r"_label(\d)\.png$", path).group(1))


@pytest.fixture(scope="module")
def server(kiln_cli, tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    for m in ("digits", "digits_pipeline", "digits_chain"):
        shutil.copytree(os.path.join(EXAMPLES, "repository", m), repo / m,
                        ignore=shutil.ignore_patterns(".kiln-cache"))
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "config.toml").write_text('backend = "echo"\n')
    log = open(repo / "serve.log", "w+")
    proc = subprocess.Popen([kiln_cli, "serve", "--repository", str(repo), "--host", "127.0.0.1",
                             "--http-port", "0", "--grpc-port", "0", "--threads", "2",
                             "--model-control-mode", "explicit"],
                            stdout=log, stderr=subprocess.STDOUT)
    ports = {}
    for _ in range(600):
        log.seek(0)
        text = log.read()
        ports = dict(re.findall(r"listening on (http|grpc)://[^:]*:(\d+)", text))
        if len(ports) == 2 or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert len(ports) == 2, f"kiln serve did not listen:\n{text}"
    yield {"http": f"http://127.0.0.1:{ports['http']}", "grpc": f"127.0.0.1:{ports['grpc']}"}
    proc.terminate()
    assert proc.wait(timeout=60) == 0


@pytest.fixture(params=["http", "grpc"])
def client(request, server):
    cls = kc.HttpClient if request.param == "http" else kc.GrpcClient
    c = cls(server[request.param])
    c.wait_until_server_ready(30)
    yield c
    c.close()


def test_health_and_metadata(client):
    assert client.server_live() and client.serverReady()
    meta = client.server_metadata()
    assert meta["name"] == "kiln" and "binary_tensor_data" in meta["extensions"]
    assert kc.serverHasExtension(client, "model_repository")
    assert client.model_ready("digits") and client.modelReady("digits_chain")
    md = client.modelMetadata("digits_chain")
    assert md["inputs"] == [{"name": "image_bytes", "datatype": "BYTES", "shape": [-1]}]
    assert md["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]
    assert {"digits", "digits_chain", "digits_pipeline", "echo"} <= set(client.model_list())


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8,
                                   np.int16, np.int32, np.int64, np.float16, np.float32,
                                   np.float64])
def test_echo_every_dtype(client, dtype):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 5)) * 50).astype(dtype)
    out = client.model_infer("echo", {"x": x}, id="r1")
    assert out.id == "r1" and out.model_name == "echo"
    assert out.outputs["x"].dtype == x.dtype
    np.testing.assert_array_equal(out.outputs["x"], x)


def test_echo_bytes_and_json_tensors(server):
    words = np.array([b"kiln", b"", "\u00e9t\u00e9".encode(), b"\x00\xff"], dtype=np.object_)
    for c in (kc.HttpClient(server["http"]), kc.HttpClient(server["http"], binary=False),
              kc.GrpcClient(server["grpc"])):
        out = c.model_infer("echo", {"w": words, "n": np.arange(6, dtype=np.int32).reshape(2, 3)})
        assert list(out.outputs["w"]) == list(words)
        np.testing.assert_array_equal(out.outputs["n"], np.arange(6).reshape(2, 3))
        c.close()


def test_digits_chain_classifies_png_bytes(client):
    """Each PNG through the chain (pipeline -> CNN) equals the pipeline then the model."""
    requests = []
    for path in IMAGES:
        r = kc.InferenceRequest(id=os.path.basename(path))
        r.addInputTensor("image_bytes", [open(path, "rb").read()])
        requests.append(r)
    results = kc.inferAsyncOrdered(client, "digits_chain", requests)
    correct = 0
    for path, result in zip(IMAGES, results):
        assert result.id == os.path.basename(path)
        logits = result.outputs["logits"]
        assert logits.shape == (1, 10)
        pixels = client.model_infer("digits_pipeline", {"image_bytes": [open(path, "rb").read()]})
        direct = client.model_infer("digits", {"image": pixels.outputs["images"]})
        np.testing.assert_allclose(logits, direct.outputs["logits"], rtol=1e-5, atol=1e-5)
        correct += int(np.argmax(logits)) == label_of(path)
    assert len(IMAGES) == 16 and correct >= 15


def test_many_images_in_one_request_and_async(client):
    images = [open(p, "rb").read() for p in IMAGES[:8]]
    out = client.model_infer("digits_chain", {"image_bytes": images})
    assert out.outputs["logits"].shape == (8, 10)
    singles = [f.result() for f in
               [client.model_infer_async("digits_chain", {"image_bytes": [b]}) for b in images]]
    for i, s in enumerate(singles):
        np.testing.assert_allclose(s.outputs["logits"][0], out.outputs["logits"][i], atol=1e-5)


def test_errors_carry_the_status(client):
    http = isinstance(client, kc.HttpClient)
    with pytest.raises(kc.InferenceServerError) as e:
        client.model_infer("nope", {"x": np.zeros(1, np.float32)})
    assert e.value.status == (404 if http else "NOT_FOUND")
    assert "does not exist" in str(e.value)
    with pytest.raises(kc.InferenceServerError) as e:
        client.model_infer("digits", {"image": np.zeros((1, 1, 8, 9), np.float32)})
    assert e.value.status == (400 if http else "INVALID_ARGUMENT")
    assert "expected shape [-1,1,8,8]" in str(e.value)
    with pytest.raises(kc.InferenceServerError) as e:
        client.model_infer("digits_chain", {"image_bytes": [b"not a png"]})
    assert "not a JPEG or PNG" in str(e.value)
    with pytest.raises(kc.InferenceServerError) as e:
        client.model_infer("digits", {"image": np.zeros((1, 1, 8, 8), np.float32)},
                           parameters={"timeout": 1})
    assert e.value.status == (503 if http else "DEADLINE_EXCEEDED")


def test_repository_and_workers(client):
    client.modelUnload("echo")
    assert not client.model_ready("echo")
    client.modelLoad("echo")
    client.wait_until_model_ready("echo")
    assert any(m["name"] == "echo" and m["state"] == "READY" for m in client.repository_index())
    endpoint = client.workerLoad("echo", {"max_batch_size": 0})
    assert endpoint.startswith("echo")
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(client.modelInfer(endpoint, {"x": x}).outputs["x"], x)
    client.workerUnload(endpoint)
    stats = client.get_inference_statistics("digits")["model_stats"][0]
    assert stats["inference_count"] > 0


def test_restricted_api_needs_the_header(kiln_cli, tmp_path):
    """kiln serve --restricted-api: the Python clients send the key as a header / metadata."""
    (tmp_path / "echo" / "1").mkdir(parents=True)
    (tmp_path / "echo" / "config.toml").write_text('backend = "echo"\n')
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([kiln_cli, "serve", "--repository", str(tmp_path), "--host",
                             "127.0.0.1", "--http-port", "0", "--grpc-port", "0",
                             "--restricted-api", "inference:x-api-key=py-key"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        ports = {}
        for _ in range(600):
            log.seek(0)
            ports = dict(re.findall(r"listening on (http|grpc)://[^:]*:(\d+)", log.read()))
            if len(ports) == 2 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert len(ports) == 2
        x = np.arange(3, dtype=np.int32)
        for cls, url, denied in ((kc.HttpClient, f"http://127.0.0.1:{ports['http']}", 401),
                                 (kc.GrpcClient, f"127.0.0.1:{ports['grpc']}", "UNAUTHENTICATED")):
            anonymous = cls(url)
            assert anonymous.server_ready()
            with pytest.raises(kc.InferenceServerError) as e:
                anonymous.model_infer("echo", {"x": x})
            assert e.value.status == denied
            assert 'need the header "x-api-key"' in str(e.value)
            keyed = cls(url, headers={"X-Api-Key": "py-key"})
            np.testing.assert_array_equal(keyed.model_infer("echo", {"x": x}).outputs["x"], x)
            anonymous.close()
            keyed.close()
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def test_tls_and_mutual_tls(kiln_cli, tmp_path):
    """kiln serve --tls-cert/--tls-key/--tls-client-ca with the Python HTTP and gRPC clients."""
    import ssl

    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run = lambda *a: subprocess.run(["openssl", *a], cwd=certs, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    for name, ext in (("server", ["-extfile", "san.ext"]), ("client", [])):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout",
            f"{name}.key", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", *ext, "-out", f"{name}.pem")
    (tmp_path / "repo" / "echo" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "echo" / "config.toml").write_text('backend = "echo"\n')
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([kiln_cli, "serve", "--repository", str(tmp_path / "repo"), "--host",
                             "127.0.0.1", "--http-port", "0", "--grpc-port", "0",
                             "--tls-cert", str(certs / "server.pem"),
                             "--tls-key", str(certs / "server.key"),
                             "--tls-client-ca", str(certs / "ca.pem")],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        ports = {}
        for _ in range(600):
            log.seek(0)
            ports = dict(re.findall(r"listening on (https|grpcs)://[^:]*:(\d+)", log.read()))
            if len(ports) == 2 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert len(ports) == 2
        read = lambda f: (certs / f).read_bytes()
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        context.load_cert_chain(str(certs / "client.pem"), str(certs / "client.key"))
        x = np.arange(3, dtype=np.int32)
        clients = [
            kc.HttpClient(f"https://127.0.0.1:{ports['https']}", ssl_context=context),
            kc.GrpcClient(f"127.0.0.1:{ports['grpcs']}", root_certificates=read("ca.pem"),
                          private_key=read("client.key"), certificate_chain=read("client.pem")),
        ]
        for c in clients:
            np.testing.assert_array_equal(c.model_infer("echo", {"x": x}).outputs["x"], x)
            c.close()
        # Without a client certificate the handshake fails.
        no_cert = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        with pytest.raises(kc.InferenceServerError):
            kc.HttpClient(f"https://127.0.0.1:{ports['https']}", ssl_context=no_cert,
                          timeout=5).server_live()
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def test_unreachable_server():
    c = kc.HttpClient("http://127.0.0.1:9", timeout=2)
    assert pytest.raises(kc.InferenceServerError, c.server_live).value.status == 0
    with pytest.raises(kc.InferenceServerError):
        c.wait_until_server_ready(timeout=0.3)


def test_loadgen_reports_throughput_latency_and_server_split(kiln_cli, server):
    import json

    png = IMAGES[3]
    out = subprocess.run([kiln_cli, "loadgen", "--url", server["http"], "--model", "digits_chain",
                          "--input", f"image_bytes={png}", "--concurrency", "1,4",
                          "--duration", "0.5", "--warmup", "0.2", "--json", "-"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["model"] == "digits_chain" and len(report["levels"]) == 2
    for level, concurrency in zip(report["levels"], (1, 4)):
        assert level["concurrency"] == concurrency and level["failures"] == 0
        assert level["requests"] > 0 and level["infer_per_s"] > 0
        assert 0 < level["p50_us"] <= level["p90_us"] <= level["p99_us"] <= level["max_us"]
        assert level["server"]["inferences"] > 0
    grpc = subprocess.run([kiln_cli, "loadgen", "--protocol", "grpc", "--url", server["grpc"],
                           "--model", "nope", "--duration", "0.2"],
                          capture_output=True, text=True, timeout=60)
    assert grpc.returncode != 0 and "does not exist" in grpc.stderr
