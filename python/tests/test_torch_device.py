# SPDX-License-Identifier: Apache-2.0
# Device-resident tensors: program.run_device over DLPack (its checks run here on CPU tensors),
# and on a machine with a GPU the lowered module and the torch.compile backend on CUDA tensors
# (no host copies) against PyTorch eager. The CUDA cases skip without a GPU.
import numpy as np
import pytest
import torch
import torch.utils.dlpack
from torch import nn

import kiln
import kiln.torch


def relu_program(target="cpu", compile_it=True):
    p = kiln.program()
    m = p.get_main_module()
    x = m.add_parameter("x", kiln.shape("float_type", [2, 3]))
    m.add_return([m.add_instruction(kiln.op("Relu"), [x])])
    if compile_it:
        p.compile(kiln.get_target(target))
    return p


def run_device_error(program, params, outputs):
    with pytest.raises(kiln.KilnError) as error:
        program.run_device(params, outputs)
    return str(error.value)


def test_run_device_checks_its_arguments():
    p = relu_program()
    out = [torch.empty(2, 3)]
    assert "is missing" in run_device_error(p, {}, out)
    assert 'no input "y"' in run_device_error(p, {"x": torch.zeros(2, 3), "y": 1}, out)
    assert "a list is not a DLPack tensor" in run_device_error(p, {"x": [[1, 2, 3]]}, out)
    message = run_device_error(p, {"x": torch.zeros(2, 3, dtype=torch.float64)}, out)
    assert '"x" is f64 but the program takes f32' in message, message
    message = run_device_error(p, {"x": torch.zeros(3, 2)}, out)
    assert "has shape [3,2] but the program was compiled for f32[2,3]" in message, message
    message = run_device_error(p, {"x": torch.zeros(3, 2).t()}, out)
    assert "not contiguous (shape [2,3], strides [1,2])" in message, message
    assert "gives 1 outputs (" in run_device_error(p, {"x": torch.zeros(2, 3)}, [])
    message = run_device_error(p, {"x": torch.zeros(2, 3)}, [torch.empty(2, 4)])
    assert "output 0" not in message and "has shape [2,4]" in message, message
    # Everything else right: the memory is on the host.
    message = run_device_error(p, {"x": torch.zeros(2, 3)}, out)
    assert '"x" is a cpu tensor; run_device takes CUDA device memory' in message, message


def test_run_device_reads_capsules_once():
    p = relu_program()
    capsule = torch.utils.dlpack.to_dlpack(torch.zeros(2, 3))
    torch.utils.dlpack.from_dlpack(capsule)  # consumed: renamed "used_dltensor"
    message = run_device_error(p, {"x": capsule}, [torch.empty(2, 3)])
    assert 'named "used_dltensor"' in message, message
    fresh = torch.utils.dlpack.to_dlpack(torch.zeros(2, 3))
    assert "is a cpu tensor" in run_device_error(p, {"x": fresh}, [torch.empty(2, 3)])


def test_run_device_needs_a_compiled_program():
    message = run_device_error(relu_program(compile_it=False), {"x": torch.zeros(2, 3)}, [])
    assert "not compiled" in message, message


def has_cuda():
    if not torch.cuda.is_available() or "cuda" not in kiln.target_names():
        return False
    try:
        relu_program("cuda")
    except kiln.KilnError:
        return False
    return True


cuda = pytest.mark.skipif(not has_cuda(), reason="needs a GPU (torch CUDA and kiln's cuda target)")


@pytest.fixture
def no_tf32():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


class HostRunRefused:
    """Stands for a KilnModule's program: run_device passes through, run() fails the test."""

    def __init__(self, program):
        self.program = program

    def run_device(self, params, outputs):
        return self.program.run_device(params, outputs)

    def run(self, params):
        raise AssertionError("the CUDA path went through host memory (program.run)")


@cuda
def test_run_device_writes_cuda_outputs():
    p = relu_program("cuda")
    torch.manual_seed(0)
    for _ in range(3):
        x = torch.randn(2, 3, device="cuda")
        out = torch.full((2, 3), float("nan"), device="cuda")
        p.run_device({"x": x}, [out])
        assert torch.equal(out, torch.relu(x))
    message = run_device_error(p, {"x": x}, [torch.empty(2, 3)])
    assert "is a cpu tensor; run_device takes CUDA device memory" in message, message


def small_cnn():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, stride=2), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).eval()


@cuda
def test_lowered_module_stays_on_the_gpu(no_tf32):
    torch.manual_seed(0)
    model = small_cnn().cuda()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    lowered = kiln.torch.lower(model, (x,), target="cuda", min_island=1)
    (island,) = kiln.torch.kiln_islands(lowered)
    island._program = HostRunRefused(island._program)
    with torch.no_grad():
        for _ in range(3):
            # The input comes from work still queued on torch's stream when the module is called.
            x = (torch.randn(4, 3, 32, 32, device="cuda") @ torch.eye(32, device="cuda")) * 1.5
            expected, actual = model(x), lowered(x)
            assert actual.is_cuda
            error = ((actual - expected).norm() / expected.norm()).item()
            assert error <= 1e-4, error
        # A non-contiguous input is made contiguous on the device.
        xt = x.transpose(2, 3)
        assert torch.allclose(lowered(xt), model(xt), rtol=1e-4, atol=1e-4)


@cuda
def test_fp16_module_on_the_gpu():
    torch.manual_seed(0)
    model = small_cnn().cuda()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    lowered = kiln.torch.lower(model, (x,), target="cuda", fp16=True, min_island=1)
    with torch.no_grad():
        expected, actual = model(x), lowered(x)
    assert actual.is_cuda and actual.dtype == torch.float32
    assert ((actual - expected).norm() / expected.norm()).item() <= 1e-2


@cuda
@pytest.mark.skipif(not kiln.torch.backend_available(), reason="needs PyTorch 2")
def test_compile_backend_on_cuda_tensors(no_tf32):
    torch.manual_seed(0)
    model = small_cnn().cuda()
    torch._dynamo.reset()
    fast = torch.compile(model, backend="kiln", options={"target": "cuda"}, dynamic=False)
    with torch.no_grad():
        for batch in (4, 4, 2):  # the second call reuses the first's program; 2 compiles again
            x = torch.randn(batch, 3, 32, 32, device="cuda")
            actual, expected = fast(x), model(x)
            assert actual.is_cuda
            np.testing.assert_allclose(actual.cpu().numpy(), expected.cpu().numpy(), rtol=1e-4,
                                       atol=1e-4)
