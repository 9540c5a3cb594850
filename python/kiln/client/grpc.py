# SPDX-License-Identifier: Apache-2.0
"""GrpcClient: the KServe v2 ``inference.GRPCInferenceService`` (python3-grpcio), with raw tensor
contents both ways. The message classes are generated at build time from
server/proto/grpc_predict_v2.proto (``protoc --python_out``); the stubs are the few lines below."""

import concurrent.futures

import grpc
import numpy as np

from kiln.client import grpc_predict_v2_pb2 as pb
from kiln.client._common import (
    Client,
    InferenceRequest,
    InferenceServerError,
    InferResult,
    numpy_dtype,
    tensor_from_bytes,
    tensor_to_bytes,
)

_SERVICE = "/inference.GRPCInferenceService/"
_WORKERS = "/inference.KilnWorkerService/"
_RPCS = {
    "ServerLive": (_SERVICE, pb.ServerLiveRequest, pb.ServerLiveResponse),
    "ServerReady": (_SERVICE, pb.ServerReadyRequest, pb.ServerReadyResponse),
    "ModelReady": (_SERVICE, pb.ModelReadyRequest, pb.ModelReadyResponse),
    "ServerMetadata": (_SERVICE, pb.ServerMetadataRequest, pb.ServerMetadataResponse),
    "ModelMetadata": (_SERVICE, pb.ModelMetadataRequest, pb.ModelMetadataResponse),
    "ModelInfer": (_SERVICE, pb.ModelInferRequest, pb.ModelInferResponse),
    "ModelStatistics": (_SERVICE, pb.ModelStatisticsRequest, pb.ModelStatisticsResponse),
    "RepositoryIndex": (_SERVICE, pb.RepositoryIndexRequest, pb.RepositoryIndexResponse),
    "RepositoryModelLoad": (_SERVICE, pb.RepositoryModelLoadRequest,
                            pb.RepositoryModelLoadResponse),
    "RepositoryModelUnload": (_SERVICE, pb.RepositoryModelUnloadRequest,
                              pb.RepositoryModelUnloadResponse),
    "WorkerLoad": (_WORKERS, pb.WorkerLoadRequest, pb.WorkerLoadResponse),
    "WorkerUnload": (_WORKERS, pb.WorkerUnloadRequest, pb.WorkerUnloadResponse),
}


def _set_parameter(message, value):
    """Sets an InferParameter or a ModelRepositoryParameter (which also takes bytes)."""
    if isinstance(value, bytes):
        message.bytes_param = value
    elif isinstance(value, bool):
        message.bool_param = value
    elif isinstance(value, int):
        message.int64_param = value
    elif isinstance(value, float) and "double_param" in message.DESCRIPTOR.fields_by_name:
        message.double_param = value
    else:
        message.string_param = str(value)


def _get_parameter(message):
    which = message.WhichOneof("parameter_choice")
    return getattr(message, which) if which else None


def _metadata(m):
    tensors = lambda ts: [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in ts]
    return {"name": m.name, "versions": list(m.versions), "platform": m.platform,
            "inputs": tensors(m.inputs), "outputs": tensors(m.outputs)}


class GrpcClient(Client):
    """``GrpcClient("127.0.0.1:8001")``; ``timeout`` is each call's deadline in seconds."""

    def __init__(self, url, concurrency=16, timeout=60.0, max_message_mib=256, headers=None,
                 root_certificates=None, private_key=None, certificate_chain=None, tls=False):
        """TLS when `tls` or `root_certificates` (PEM bytes of the CA to trust) is given; mutual
        TLS with `private_key` and `certificate_chain` (PEM bytes)."""
        super().__init__(concurrency)
        if url.startswith("grpc://"):
            url = url[len("grpc://"):]
        size = max_message_mib << 20
        options = [("grpc.max_send_message_length", size),
                   ("grpc.max_receive_message_length", size)]
        if tls or root_certificates is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates, private_key,
                                                       certificate_chain)
            self._channel = grpc.secure_channel(url, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(url, options=options)
        self.timeout = timeout
        # Sent as metadata with every call, e.g. {"x-api-key": "..."} (keys in lower case).
        self._metadata = [(k.lower(), v) for k, v in (headers or {}).items()]
        self._stubs = {
            name: self._channel.unary_unary(prefix + name,
                                            request_serializer=req.SerializeToString,
                                            response_deserializer=resp.FromString)
            for name, (prefix, req, resp) in _RPCS.items()
        }

    def close(self):
        super().close()
        self._channel.close()

    def _call(self, rpc, **fields):
        return self._send(rpc, _RPCS[rpc][1](**fields))

    def _send(self, rpc, request):
        try:
            return self._stubs[rpc](request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise InferenceServerError(f"{rpc}: {e.details()}", e.code().name) from None

    def server_live(self):
        return self._call("ServerLive").live

    def server_ready(self):
        return self._call("ServerReady").ready

    def server_metadata(self):
        m = self._call("ServerMetadata")
        return {"name": m.name, "version": m.version, "extensions": list(m.extensions)}

    def model_ready(self, model, version=""):
        return self._call("ModelReady", name=model, version=str(version)).ready

    def model_metadata(self, model, version=""):
        return _metadata(self._call("ModelMetadata", name=model, version=str(version)))

    def model_list(self):
        return sorted({m.name for m in self._call("RepositoryIndex", ready=True).models})

    def repository_index(self, ready=False):
        return [{"name": m.name, "version": m.version, "state": m.state, "reason": m.reason}
                for m in self._call("RepositoryIndex", ready=ready).models]

    def model_load(self, model, parameters=None):
        request = pb.RepositoryModelLoadRequest(model_name=model)
        for key, value in (parameters or {}).items():
            _set_parameter(request.parameters[key], value)
        self._send("RepositoryModelLoad", request)

    def model_unload(self, model):
        self._call("RepositoryModelUnload", model_name=model)

    def model_statistics(self, model="", version=""):
        stats = self._call("ModelStatistics", name=model, version=str(version))
        duration = lambda d: {"count": d.count, "ns": d.ns}
        return {"model_stats": [
            {"name": s.name, "version": s.version, "inference_count": s.inference_count,
             "execution_count": s.execution_count,
             "inference_stats": {k: duration(getattr(s.inference_stats, k))
                                 for k in ("success", "fail", "queue", "compute_infer")}}
            for s in stats.model_stats]}

    def worker_load(self, worker, parameters=None):
        request = pb.WorkerLoadRequest(worker=worker)
        for key, value in (parameters or {}).items():
            _set_parameter(request.parameters[key], value)
        return self._send("WorkerLoad", request).endpoint

    def worker_unload(self, endpoint):
        self._call("WorkerUnload", endpoint=endpoint)

    def _infer_message(self, model, request, version):
        message = pb.ModelInferRequest(model_name=model, model_version=str(version), id=request.id)
        for key, value in request.parameters.items():
            _set_parameter(message.parameters[key], value)
        for name, array, datatype in request.inputs:
            message.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
            message.raw_input_contents.append(tensor_to_bytes(array, datatype))
        for name in request.outputs:
            message.outputs.add(name=name)
        return message

    @staticmethod
    def _result(response):
        outputs = {}
        for i, out in enumerate(response.outputs):
            shape = list(out.shape)
            if i < len(response.raw_output_contents) and (
                response.raw_output_contents[i] or not out.HasField("contents")
            ):
                outputs[out.name] = tensor_from_bytes(response.raw_output_contents[i],
                                                      out.datatype, shape)
                continue
            c = out.contents
            field = {"BOOL": c.bool_contents, "INT64": c.int64_contents,
                     "UINT64": c.uint64_contents, "FP32": c.fp32_contents,
                     "FP64": c.fp64_contents, "BYTES": c.bytes_contents}.get(out.datatype)
            if field is None:
                field = c.int_contents if out.datatype.startswith("INT") else c.uint_contents
            outputs[out.name] = np.array(list(field), dtype=numpy_dtype(out.datatype)).reshape(shape)
        params = {k: _get_parameter(v) for k, v in response.parameters.items()}
        return InferResult(response.model_name, response.model_version, response.id, outputs,
                           params)

    def model_infer(self, model, request, version="", outputs=None, id="", parameters=None):
        """Runs `request` (an InferenceRequest, a {name: array} dict or (name, array) pairs)."""
        request = InferenceRequest.of(request, outputs, id, parameters)
        try:
            response = self._stubs["ModelInfer"](self._infer_message(model, request, version),
                                                 timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise InferenceServerError(f"model {model}: {e.details()}", e.code().name) from None
        return self._result(response)

    def model_infer_async(self, model, request, version="", outputs=None, id="", parameters=None):
        """A concurrent.futures.Future of the InferResult, on gRPC's own async call (no thread
        per request)."""
        request = InferenceRequest.of(request, outputs, id, parameters)
        call = self._stubs["ModelInfer"].future(self._infer_message(model, request, version),
                                                timeout=self.timeout, metadata=self._metadata)
        future = concurrent.futures.Future()

        def done(c):
            try:
                future.set_result(self._result(c.result()))
            except grpc.RpcError as e:
                future.set_exception(
                    InferenceServerError(f"model {model}: {e.details()}", e.code().name))

        call.add_done_callback(done)
        return future
