# SPDX-License-Identifier: Apache-2.0
"""What the HTTP and gRPC clients share: requests, results, errors, tensor bytes, aliases."""

import concurrent.futures
import struct
import time

import numpy as np

# KServe datatype <-> numpy dtype (BYTES: object arrays of bytes).
_DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
}


class InferenceServerError(Exception):
    """A request the server (or the connection) refused.

    ``status`` is the HTTP status (400, 404, 429, 503, ...) or the gRPC code's name
    ("NOT_FOUND", "INVALID_ARGUMENT", ...); 0 / "UNAVAILABLE" when the server cannot be reached.
    """

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status

    def message(self):
        return str(self)


def datatype_of(array):
    """The KServe datatype of a numpy array."""
    if array.dtype == np.object_ or array.dtype.kind in "SU":
        return "BYTES"
    for name, dtype in _DTYPES.items():
        if array.dtype == dtype:
            return name
    raise InferenceServerError(f"numpy dtype {array.dtype} has no KServe datatype")


def numpy_dtype(datatype):
    if datatype == "BYTES":
        return np.dtype(np.object_)
    if datatype not in _DTYPES:
        raise InferenceServerError(f"datatype {datatype} is not one numpy can hold here")
    return _DTYPES[datatype]


def _as_bytes(value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview, np.bytes_)):
        return bytes(value)
    raise InferenceServerError(f"a BYTES element must be bytes or str, not {type(value).__name__}")


def tensor_to_bytes(array, datatype):
    """Little-endian row-major bytes; BYTES elements are a 4-byte length and the bytes."""
    if datatype == "BYTES":
        parts = []
        for value in array.reshape(-1):
            b = _as_bytes(value)
            parts.append(struct.pack("<I", len(b)))
            parts.append(b)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=numpy_dtype(datatype).newbyteorder("<")).tobytes()


def tensor_from_bytes(raw, datatype, shape):
    if datatype == "BYTES":
        out, at = [], 0
        view = memoryview(raw)
        while at < len(raw):
            (n,) = struct.unpack_from("<I", raw, at)
            out.append(bytes(view[at + 4 : at + 4 + n]))
            at += 4 + n
        array = np.empty(len(out), dtype=np.object_)
        array[:] = out
        return array.reshape(shape)
    return np.frombuffer(raw, dtype=numpy_dtype(datatype).newbyteorder("<")).reshape(shape)


class InferenceRequest:
    """An inference request: named input tensors, requested outputs, id and parameters.

    ``model_infer`` also takes a plain ``{name: array}`` dict. amdinfer's names work too:
    ``request.addInputTensor(name, array)``.
    """

    def __init__(self, inputs=None, outputs=None, id="", parameters=None):
        self.inputs = []  # (name, numpy array, datatype)
        self.outputs = list(outputs or [])  # names
        self.id = id
        self.parameters = dict(parameters or {})
        for name, array in (inputs or {}).items():
            self.add_input_tensor(name, array)

    def add_input_tensor(self, name, array, datatype=None):
        if isinstance(array, (list, tuple)) and array and isinstance(array[0], (bytes, str)):
            values = np.empty(len(array), dtype=np.object_)
            values[:] = list(array)
            array = values
        array = np.asarray(array)
        self.inputs.append((name, array, datatype or datatype_of(array)))
        return self

    def add_output(self, name):
        self.outputs.append(name)
        return self

    addInputTensor = add_input_tensor
    addOutputTensor = add_output

    @staticmethod
    def of(request, outputs=None, id="", parameters=None):
        if isinstance(request, InferenceRequest):
            return request
        if isinstance(request, dict):
            return InferenceRequest(request, outputs, id, parameters)
        r = InferenceRequest(None, outputs, id, parameters)
        for name, array in request:
            r.add_input_tensor(name, array)
        return r


class InferResult:
    """A response: ``outputs`` maps each output's name to a numpy array (in the server's order)."""

    def __init__(self, model_name, model_version, id, outputs, parameters=None):
        self.model_name = model_name
        self.model_version = model_version
        self.id = id
        self.outputs = outputs
        self.parameters = parameters or {}

    def as_numpy(self, name):
        return self.outputs.get(name)

    def __repr__(self):
        shapes = ", ".join(f"{n}: {a.dtype}{list(a.shape)}" for n, a in self.outputs.items())
        return f"InferResult(model={self.model_name!r}, id={self.id!r}, {{{shapes}}})"


class Client:
    """The methods every transport implements, their amdinfer and tritonclient aliases, and the
    helpers built on them."""

    def __init__(self, concurrency=16):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency))

    def close(self):
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def model_infer_async(self, model, request, version="", **kwargs):
        """A concurrent.futures.Future of the InferResult (raises InferenceServerError)."""
        return self._pool.submit(self.model_infer, model, request, version, **kwargs)

    def wait_until_server_ready(self, timeout=30.0):
        """Polls server_ready until it is true; InferenceServerError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last = "not ready"
        while time.monotonic() < deadline:
            try:
                if self.server_ready():
                    return
            except InferenceServerError as e:
                last = str(e)
            time.sleep(0.05)
        raise InferenceServerError(f"the server was not ready within {timeout} s ({last})", 503)

    def wait_until_model_ready(self, model, version="", timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.model_ready(model, version):
                    return
            except InferenceServerError:
                pass
            time.sleep(0.01)
        raise InferenceServerError(f"model {model} was not ready within {timeout} s", 503)

    # amdinfer's names.
    def serverLive(self):
        return self.server_live()

    def serverReady(self):
        return self.server_ready()

    def serverMetadata(self):
        return self.server_metadata()

    def modelReady(self, model, version=""):
        return self.model_ready(model, version)

    def modelMetadata(self, model, version=""):
        return self.model_metadata(model, version)

    def modelLoad(self, model, parameters=None, version=""):
        return self.model_load(model, parameters)

    def modelUnload(self, model, version=""):
        return self.model_unload(model)

    def modelInfer(self, model, request, version=""):
        return self.model_infer(model, request, version)

    def modelInferAsync(self, model, request, version=""):
        return self.model_infer_async(model, request, version)

    def modelList(self):
        return self.model_list()

    def workerLoad(self, worker, parameters=None):
        return self.worker_load(worker, parameters)

    def workerUnload(self, endpoint):
        return self.worker_unload(endpoint)

    # tritonclient's names.
    def is_server_live(self):
        return self.server_live()

    def is_server_ready(self):
        return self.server_ready()

    def is_model_ready(self, model_name, model_version=""):
        return self.model_ready(model_name, model_version)

    def get_server_metadata(self):
        return self.server_metadata()

    def get_model_metadata(self, model_name, model_version=""):
        return self.model_metadata(model_name, model_version)

    def get_model_repository_index(self):
        return self.repository_index()

    def get_inference_statistics(self, model_name="", model_version=""):
        return self.model_statistics(model_name, model_version)

    def load_model(self, model_name, parameters=None):
        return self.model_load(model_name, parameters)

    def unload_model(self, model_name):
        return self.model_unload(model_name)

    def infer(self, model_name, inputs, model_version="", outputs=None, request_id="",
              parameters=None):
        request = InferenceRequest.of(inputs, outputs, request_id, parameters)
        return self.model_infer(model_name, request, model_version)


def wait_until_server_ready(client, timeout=30.0):
    client.wait_until_server_ready(timeout)


def wait_until_model_ready(client, model, version="", timeout=30.0):
    client.wait_until_model_ready(model, version, timeout)


def server_has_extension(client, extension):
    return extension in client.server_metadata().get("extensions", [])


def infer_async_ordered(client, model, requests, version=""):
    """Sends every request at once and returns their results in the requests' order."""
    futures = [client.model_infer_async(model, r, version) for r in requests]
    return [f.result() for f in futures]
