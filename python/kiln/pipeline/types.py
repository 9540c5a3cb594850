# SPDX-License-Identifier: Apache-2.0
"""Constants of the pipeline API under rocAL's and DALI's names (``import kiln.pipeline.types as
types``). Each is a str, so it can be passed where kiln's operators take a string argument."""

from enum import Enum


class _Constant(str, Enum):
    def __str__(self):
        return self.value

    def __repr__(self):
        return f"types.{self.name}"


class DALIImageType(_Constant):
    RGB = "RGB"
    BGR = "BGR"
    GRAY = "GRAY"


class DALIDataType(_Constant):
    FLOAT = "float32"
    FLOAT16 = "float16"
    UINT8 = "uint8"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"


class TensorLayout(_Constant):
    NCHW = "NCHW"
    NHWC = "NHWC"


class DeviceType(_Constant):
    CPU = "cpu"
    GPU = "gpu"


class DALIInterpType(_Constant):
    INTERP_NN = "nearest"
    INTERP_LINEAR = "linear"


class MemoryType(_Constant):
    HOST_MEMORY = "host"
    DEVICE_MEMORY = "device"


class LastBatchPolicy(_Constant):
    FILL = "fill"
    DROP = "drop"
    PARTIAL = "partial"


RGB, BGR, GRAY = DALIImageType.RGB, DALIImageType.BGR, DALIImageType.GRAY
FLOAT, FLOAT16, UINT8 = DALIDataType.FLOAT, DALIDataType.FLOAT16, DALIDataType.UINT8
INT8, INT16, INT32, INT64 = (DALIDataType.INT8, DALIDataType.INT16, DALIDataType.INT32,
                             DALIDataType.INT64)
NCHW, NHWC = TensorLayout.NCHW, TensorLayout.NHWC
CPU, GPU = DeviceType.CPU, DeviceType.GPU
# DALI's and rocAL's names for the interpolations kiln's resize has.
INTERP_NN, INTERP_LINEAR = DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR
NEAREST_NEIGHBOR_INTERPOLATION = DALIInterpType.INTERP_NN
LINEAR_INTERPOLATION = DALIInterpType.INTERP_LINEAR
# rocAL's output_memory_type: device memory keeps what GPU operators make on the GPU.
HOST_MEMORY, DEVICE_MEMORY = MemoryType.HOST_MEMORY, MemoryType.DEVICE_MEMORY
# rocAL's names for the last-batch policies (DALI's are LastBatchPolicy.FILL/DROP/PARTIAL).
LAST_BATCH_FILL = LastBatchPolicy.FILL
LAST_BATCH_DROP = LastBatchPolicy.DROP
LAST_BATCH_PARTIAL = LastBatchPolicy.PARTIAL
