# SPDX-License-Identifier: Apache-2.0
# Pipeline outputs kept in GPU memory (output_memory_type=types.DEVICE_MEMORY): TensorLists of
# device "gpu" that torch.from_dlpack takes as CUDA tensors without a copy, as_cpu() copies, and
# the PyTorch iterators yield as CUDA tensors. The argument checks run everywhere; the GPU cases
# skip without a CUDA device.
import numpy as np
import pytest
import torch

import kiln
import kiln.pipeline.fn as fn
import kiln.pipeline.types as types
from kiln.pipeline import Pipeline
from kiln.pipeline.plugin.pytorch import DALIGenericIterator

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def gpu_pipe(root, memory, device="gpu", **kwargs):
    """decode on the CPU; resize (uint8 HWC) and normalize (float CHW) on `device`."""
    pipe = Pipeline(batch_size=4, num_threads=2, seed=3, output_memory_type=memory, **kwargs)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=root)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        small = fn.resize(images, resize_x=36, resize_y=28, device=device)
        normalized = fn.crop_mirror_normalize(small, crop=[24, 32], mean=MEAN, std=STD,
                                              device=device)
        pipe.set_outputs(small, normalized, labels)
    pipe.build()
    return pipe


def test_output_memory_type_is_checked_and_cpu_outputs_stay_on_the_host(dataset):
    with pytest.raises(kiln.KilnError, match="output_memory_type 'pinned'"):
        Pipeline(batch_size=2, output_memory_type="pinned")
    # Device memory keeps only what GPU operators make: a CPU pipeline's outputs are host ones.
    pipe = gpu_pipe(dataset, types.DEVICE_MEMORY, device="cpu")
    small, normalized, labels = pipe.run()
    for t in (small, normalized, labels):
        assert t.device == "cpu"
        assert t.as_cpu() is t
    assert small.as_array().shape == (4, 28, 36, 3)


@needs_gpu
def test_device_batches_are_cuda_tensors_equal_to_host_ones(dataset):
    host = gpu_pipe(dataset, types.HOST_MEMORY)
    device = gpu_pipe(dataset, types.DEVICE_MEMORY)
    kept = []
    for _ in range(3):
        h_small, h_norm, h_labels = host.run()
        d_small, d_norm, d_labels = device.run()
        assert (h_small.device, d_small.device, d_norm.device) == ("cpu", "gpu", "gpu")
        assert d_labels.device == "cpu"  # made on the CPU
        assert len(d_small) == 4 and d_small.is_dense_tensor()
        assert d_small.shape() == [(28, 36, 3)] * 4 and d_norm.dtype() == np.float32
        x = torch.from_dlpack(d_small)
        assert x.is_cuda and x.shape == (4, 28, 36, 3) and x.dtype == torch.uint8
        assert torch.equal(x.cpu(), torch.from_numpy(h_small.as_array()))
        y = torch.from_dlpack(d_norm)
        assert y.is_cuda and y.shape == (4, 3, 24, 32)
        np.testing.assert_array_equal(y.cpu().numpy(), h_norm.as_array())
        np.testing.assert_array_equal(d_norm.as_cpu().as_array(), h_norm.as_array())
        with pytest.raises(kiln.KilnError, match="in GPU memory"):
            d_small.at(0)
        with pytest.raises(kiln.KilnError, match="in GPU memory"):
            d_small.as_array()
        # The CUDA tensor keeps the batch: it outlives its TensorList and later batches.
        kept.append((x, x.cpu().clone()))
        del d_small, d_norm
    for x, copy in kept:
        torch.cuda.synchronize()
        assert torch.equal(x.cpu(), copy)


@needs_gpu
def test_torch_iterator_yields_cuda_tensors_converted_on_the_gpu(dataset):
    def iterate(memory):
        pipe = gpu_pipe(dataset, memory, tensor_layout=types.NCHW, tensor_dtype=types.FLOAT,
                        mean=[100.0, 110.0, 120.0], std=[50.0, 60.0, 70.0])
        it = DALIGenericIterator(pipe, ["small", "normalized", "label"])
        return [b[0] for b in it]

    on_host, on_device = iterate(types.HOST_MEMORY), iterate(types.DEVICE_MEMORY)
    assert len(on_host) == len(on_device) == 3  # 12 images, batches of 4
    for h, d in zip(on_host, on_device):
        assert not h["small"].is_cuda and d["small"].is_cuda and d["normalized"].is_cuda
        assert d["small"].shape == (4, 3, 28, 36) and d["small"].dtype == torch.float32
        torch.testing.assert_close(d["small"].cpu(), h["small"], rtol=1e-6, atol=1e-5)
        torch.testing.assert_close(d["normalized"].cpu(), h["normalized"], rtol=0, atol=0)
        assert torch.equal(d["label"], h["label"])
