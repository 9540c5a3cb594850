# SPDX-License-Identifier: Apache-2.0
"""HttpClient: KServe v2 REST with the binary tensor data extension, on http.client keep-alive
connections (one per thread, so model_infer_async runs requests in parallel)."""

import http.client
import json
import threading
import urllib.parse

import numpy as np

from kiln.client._common import (
    Client,
    InferenceRequest,
    InferenceServerError,
    InferResult,
    numpy_dtype,
    tensor_from_bytes,
    tensor_to_bytes,
)


def _model_path(model, version):
    path = "/v2/models/" + urllib.parse.quote(model, safe="")
    if version:
        path += "/versions/" + urllib.parse.quote(str(version), safe="")
    return path


class HttpClient(Client):
    """``HttpClient("http://127.0.0.1:8000")``; ``binary=False`` sends and asks for JSON tensors;
    ``concurrency`` is the number of requests model_infer_async runs at once; ``timeout`` is each
    request's socket timeout in seconds."""

    def __init__(self, url, binary=True, concurrency=16, timeout=60.0, headers=None,
                 ssl_context=None):
        """`url` is http://host:port or https://host:port; for https, `ssl_context` (an
        ssl.SSLContext, e.g. ssl.create_default_context(cafile=CA) with load_cert_chain for mutual
        TLS) says whom to trust, by default the system's CAs."""
        super().__init__(concurrency)
        parsed = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InferenceServerError(f"{url}: expected http://host:port or https://host:port",
                                       400)
        self.host = parsed.hostname
        self.https = parsed.scheme == "https"
        self.ssl_context = ssl_context
        self.port = parsed.port or (443 if self.https else 80)
        self.binary = binary
        self.timeout = timeout
        # Sent with every call, e.g. {"x-api-key": "..."} for kiln serve --restricted-api.
        self.headers = dict(headers or {})
        self._local = threading.local()

    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.https:
                conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                                   context=self.ssl_context)
            else:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _request(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); a dropped keep-alive connection is reopened once."""
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=body, headers={**self.headers, **(headers or {})})
                response = conn.getresponse()
                return response.status, response, response.read()
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                conn.close()
                self._local.conn = None
                if attempt == 1 or not isinstance(
                    e, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
                ):
                    raise InferenceServerError(
                        f"cannot reach the server at {self.host}:{self.port}: {e}", 0
                    ) from e
        raise AssertionError("unreachable")

    def _json(self, method, path, payload=None, ok=(200,)):
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        status, _, data = self._request(method, path, body, headers)
        if status not in ok:
            raise self._error(status, data, path)
        return json.loads(data) if data else None

    @staticmethod
    def _error(status, data, path):
        try:
            message = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            message = data.decode(errors="replace") or f"HTTP {status}"
        return InferenceServerError(f"{path}: {message}", status)

    def server_live(self):
        status, _, _ = self._request("GET", "/v2/health/live")
        return status == 200

    def server_ready(self):
        status, _, _ = self._request("GET", "/v2/health/ready")
        return status == 200

    def server_metadata(self):
        return self._json("GET", "/v2")

    def model_ready(self, model, version=""):
        path = _model_path(model, version) + "/ready"
        status, _, data = self._request("GET", path)
        if status in (200, 503):
            return status == 200
        raise self._error(status, data, path)

    def model_metadata(self, model, version=""):
        return self._json("GET", _model_path(model, version))

    def model_config(self, model, version=""):
        return self._json("GET", _model_path(model, version) + "/config")

    def model_list(self):
        return self._json("GET", "/v2/models")["models"]

    def model_load(self, model, parameters=None):
        payload = {"parameters": dict(parameters)} if parameters else {}
        path = "/v2/repository/models/" + urllib.parse.quote(model, safe="") + "/load"
        self._json("POST", path, payload)

    def model_unload(self, model):
        path = "/v2/repository/models/" + urllib.parse.quote(model, safe="") + "/unload"
        self._json("POST", path, {})

    def repository_index(self, ready=False):
        return self._json("POST", "/v2/repository/index", {"ready": True} if ready else {})

    def model_statistics(self, model="", version=""):
        path = (_model_path(model, version) if model else "/v2/models") + "/stats"
        return self._json("GET", path)

    def worker_load(self, worker, parameters=None):
        path = "/v2/workers/" + urllib.parse.quote(worker, safe="") + "/load"
        status, _, data = self._request(
            "POST", path, json.dumps(dict(parameters or {})).encode(),
            {"Content-Type": "application/json"})
        if status != 200:
            raise self._error(status, data, path)
        return data.decode()

    def worker_unload(self, endpoint):
        path = "/v2/workers/" + urllib.parse.quote(endpoint, safe="") + "/unload"
        status, _, data = self._request("POST", path, b"{}")
        if status != 200:
            raise self._error(status, data, path)

    def model_infer(self, model, request, version="", outputs=None, id="", parameters=None):
        """Runs `request` (an InferenceRequest, a {name: array} dict or (name, array) pairs)."""
        request = InferenceRequest.of(request, outputs, id, parameters)
        payload = {"inputs": []}
        if request.id:
            payload["id"] = request.id
        params = dict(request.parameters)
        blobs = []
        for name, array, datatype in request.inputs:
            tensor = {"name": name, "shape": list(array.shape), "datatype": datatype}
            if self.binary or datatype in ("BYTES", "FP16"):
                raw = tensor_to_bytes(array, datatype)
                tensor["parameters"] = {"binary_data_size": len(raw)}
                blobs.append(raw)
            else:
                tensor["data"] = array.reshape(-1).tolist()
            payload["inputs"].append(tensor)
        if self.binary or blobs:  # JSON cannot carry arbitrary BYTES or FP16 back either
            params["binary_data_output"] = True
        if params:
            payload["parameters"] = params
        if request.outputs:
            payload["outputs"] = [{"name": n} for n in request.outputs]
        header = json.dumps(payload).encode()
        headers = {"Content-Type": "application/octet-stream" if blobs else "application/json"}
        if blobs:
            headers["Inference-Header-Content-Length"] = str(len(header))
        path = _model_path(model, version) + "/infer"
        status, response, data = self._request("POST", path, header + b"".join(blobs), headers)
        if status != 200:
            raise self._error(status, data, path)
        json_size = response.getheader("Inference-Header-Content-Length")
        json_size = int(json_size) if json_size is not None else len(data)
        body = json.loads(data[:json_size])
        at = json_size
        result = {}
        for out in body.get("outputs", []):
            datatype, shape = out["datatype"], out["shape"]
            size = out.get("parameters", {}).get("binary_data_size")
            if size is not None:
                result[out["name"]] = tensor_from_bytes(data[at : at + size], datatype, shape)
                at += size
            elif datatype == "BYTES":
                values = np.empty(len(out["data"]), dtype=np.object_)
                values[:] = [v.encode() if isinstance(v, str) else v for v in out["data"]]
                result[out["name"]] = values.reshape(shape)
            else:
                result[out["name"]] = np.array(out["data"], dtype=numpy_dtype(datatype)).reshape(shape)
        return InferResult(body.get("model_name", model), body.get("model_version", ""),
                           body.get("id", ""), result, body.get("parameters"))
