# SPDX-License-Identifier: Apache-2.0
"""Clients of ``kiln serve`` (KServe v2 over HTTP and gRPC) with numpy tensors, in pure Python.

snake_case names follow kiln's C++ client (and tritonclient's where it has them); amdinfer's
camelCase names are aliases of the same methods, so an amdinfer script ports by changing its
import::

    from kiln.client import HttpClient, GrpcClient
    client = HttpClient("http://127.0.0.1:8000")        # or GrpcClient("127.0.0.1:8001")
    client.wait_until_server_ready()
    result = client.model_infer("digits", {"image": array})   # or client.modelInfer(...)
    scores = result.outputs["logits"]                          # a numpy array
    futures = [client.model_infer_async("digits", {"image": a}) for a in arrays]

HTTP sends tensors with the binary tensor data extension (``binary=False``: JSON); gRPC sends
``raw_input_contents`` and asks for ``raw_output_contents``. BYTES tensors are numpy object arrays
of ``bytes`` (``str`` elements are sent as UTF-8).
"""

from kiln.client._common import (
    Client,
    InferenceRequest,
    InferenceServerError,
    InferResult,
    infer_async_ordered,
    server_has_extension,
    wait_until_model_ready,
    wait_until_server_ready,
)
from kiln.client.http import HttpClient

# amdinfer's module functions.
inferAsyncOrdered = infer_async_ordered
serverHasExtension = server_has_extension
waitUntilModelReady = wait_until_model_ready
waitUntilServerReady = wait_until_server_ready


def __getattr__(name):
    # gRPC needs python3-grpcio; importing kiln.client for HTTP does not.
    if name == "GrpcClient":
        from kiln.client.grpc import GrpcClient

        return GrpcClient
    raise AttributeError(f"module 'kiln.client' has no attribute '{name}'")


__all__ = [
    "Client",
    "GrpcClient",
    "HttpClient",
    "InferResult",
    "InferenceRequest",
    "InferenceServerError",
    "inferAsyncOrdered",
    "infer_async_ordered",
    "serverHasExtension",
    "server_has_extension",
    "waitUntilModelReady",
    "waitUntilServerReady",
    "wait_until_model_ready",
    "wait_until_server_ready",
]
