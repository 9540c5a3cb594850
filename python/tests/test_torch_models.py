# SPDX-License-Identifier: Apache-2.0
# kiln.torch.lower on whole models against PyTorch eager (fp32, cpu): torchvision ResNet-50 and
# MobileNetV2 (random weights, fixed seed, 64x64 inputs to keep it fast), transformer encoders, a
# model with an op kiln lacks (the splitter), pickling, and the torch.compile backend's guard.
import io
import pickle

import pytest
import torch
import torchvision
from torch import nn

import kiln
import kiln.torch


def rel_error(actual, expected):
    return ((actual - expected).abs().max() / expected.abs().max()).item()


def check_lowered(model, inputs, islands=1):
    model = model.eval()
    lowered = kiln.torch.lower(model, inputs)
    assert len(kiln.torch.kiln_islands(lowered)) == islands, lowered.code
    with torch.no_grad():
        expected, actual = model(*inputs), lowered(*inputs)
    assert rel_error(actual, expected) <= 1e-4
    return lowered


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_torchvision_model(name):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)()
    lowered = check_lowered(model, (torch.randn(2, 3, 64, 64),))
    # The whole network is one kiln program.
    assert [n.target for n in lowered.graph.nodes if n.op == "call_module"] == ["fused_0"]


@pytest.mark.parametrize("batch_first,norm_first,activation", [
    (True, False, "relu"), (False, True, "gelu")])
def test_transformer_encoder(batch_first, norm_first, activation):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, activation=activation,
                                       batch_first=batch_first, norm_first=norm_first)
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(64) if norm_first else None)
    shape = (2, 12, 64) if batch_first else (12, 2, 64)
    check_lowered(encoder, (torch.randn(*shape),))


class Classifier(nn.Module):
    """A small transformer classifier written with functional ops (embedding stays in torch)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 1)
        self.head = nn.Linear(32, 5)

    def forward(self, tokens):
        x = self.encoder(self.embed(tokens))
        return torch.softmax(self.head(x.mean(dim=1)), dim=-1)


def test_unsupported_op_runs_in_pytorch():
    torch.manual_seed(0)
    tokens = torch.randint(0, 100, (3, 10))
    lowered = check_lowered(Classifier(), (tokens,))
    calls = [n.target for n in lowered.graph.nodes if n.op == "call_module"]
    assert calls == ["embed", "fused_0"], lowered.code  # nn.Embedding has no converter


class Splits(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
                               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))

    def forward(self, x):
        y = torch.cumsum(self.a(x), dim=2)  # kiln has no converter for cumsum
        return self.b(y * torch.sigmoid(y)), x.shape[0]


def test_splitter_and_min_island():
    torch.manual_seed(0)
    model, x = Splits().eval(), torch.randn(2, 3, 16, 16)
    lowered = kiln.torch.lower(model, (x,))
    assert len(kiln.torch.kiln_islands(lowered)) == 2
    with torch.no_grad():
        (out, n), (ref, n_ref) = lowered(x), model(x)
    assert n == n_ref == 2 and rel_error(out, ref) <= 1e-4
    # Islands smaller than min_island stay in PyTorch.
    small = kiln.torch.lower(model, (x,), min_island=7)
    assert len(kiln.torch.kiln_islands(small)) == 1
    with torch.no_grad():
        assert rel_error(small(x)[0], ref) <= 1e-4


def test_pickle_and_torch_save_reload():
    torch.manual_seed(0)
    model, x = Splits().eval(), torch.randn(2, 3, 16, 16)
    lowered = kiln.torch.lower(model, (x,))
    with torch.no_grad():
        ref = lowered(x)[0]
    again = pickle.loads(pickle.dumps(lowered))
    buffer = io.BytesIO()
    torch.save(lowered, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    with torch.no_grad():
        torch.testing.assert_close(again(x)[0], ref, rtol=0, atol=0)
        torch.testing.assert_close(loaded(x)[0], ref, rtol=0, atol=0)
    assert kiln.torch.kiln_islands(loaded)[0].program.is_compiled()


def test_shape_mismatch_names_the_fix():
    class Scale(nn.Module):
        def forward(self, x):
            return x.view(x.size(0), -1) * 2 + 1

    lowered = kiln.torch.lower(Scale(), (torch.randn(2, 3),), min_island=1)
    with pytest.raises(kiln.KilnError, match="x0"):
        lowered(torch.randn(4, 3))


def test_compile_backend_needs_pytorch2():
    if kiln.torch.backend_available():
        pytest.skip(f"PyTorch {torch.__version__} has torch.compile")
    with pytest.raises(kiln.KilnNotImplementedError, match="needs PyTorch 2"):
        kiln.torch.compile_backend(None, [])


def test_compile_backend_caches_by_shape():
    if not kiln.torch.backend_available():
        pytest.skip(f"PyTorch {torch.__version__} has no torch.compile")
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    compiled = torch.compile(model, backend="kiln", options={"target": "cpu"})
    for batch in (1, 2, 1):
        x = torch.randn(batch, 3, 64, 64)
        with torch.no_grad():
            assert rel_error(compiled(x), model(x)) <= 1e-4


class DynamoStyle(nn.Module):
    """A graph as Dynamo hands it to a backend (PyTorch 2): functional calls, parameters and
    buffers lifted to placeholders named after their module path."""

    def forward(self, L_x_, L_self_modules_conv_parameters_weight_, L_self_modules_bn_buffers_mean_,
                L_self_modules_bn_buffers_var_):
        y = torch.conv2d(L_x_, L_self_modules_conv_parameters_weight_, None, (1, 1), (1, 1),
                         (1, 1), 1)
        y = torch.nn.functional.batch_norm(y, L_self_modules_bn_buffers_mean_,
                                           L_self_modules_bn_buffers_var_, None, None, False,
                                           0.1, 1e-05)
        y = torch.nn.functional.relu(y, inplace=True)
        return (torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1),)


def test_backend_freezes_parameters_and_caches_by_shape():
    from kiln.torch.dynamo import ShapeCache

    torch.manual_seed(0)
    gm = torch.fx.symbolic_trace(DynamoStyle())
    weight = nn.Parameter(torch.randn(8, 3, 3, 3))
    mean, var = torch.randn(8), torch.rand(8) + 0.5
    runner = ShapeCache(gm, {"target": "cpu", "fp16": False, "min_island": 1, "threads": 0})
    for batch in (1, 3, 1):
        x = torch.randn(batch, 3, 8, 8)
        (out,) = runner(x, weight, mean, var)
        (expected,) = gm(x, weight, mean, var)
        assert rel_error(out, expected.detach()) <= 1e-4
    assert runner.keep == [0]  # the parameter and the buffers became constants
    assert sorted(k[0][0] for k in runner.cache) == [(1, 3, 8, 8), (3, 3, 8, 8)]
    lowered = runner.cache[((1, 3, 8, 8), torch.float32, "cpu"),]
    assert len(kiln.torch.kiln_islands(lowered)) == 1, lowered.code


def test_unpickling_recompiles_when_the_artifact_does_not_load():
    torch.manual_seed(0)
    model, x = Splits().eval(), torch.randn(2, 3, 16, 16)
    lowered = kiln.torch.lower(model, (x,))
    island = kiln.torch.kiln_islands(lowered)[0]
    state = island.__getstate__()
    assert isinstance(state["_program"], bytes)
    state["_program"] = b"not a kiln artifact"  # as from another machine or kiln version
    rebuilt = kiln.torch.KilnModule.__new__(kiln.torch.KilnModule)
    rebuilt.__setstate__(state)
    args = [torch.randn(shape) for shape, _ in island._input_specs]
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(*args), island(*args), rtol=0, atol=0)


def test_fp16_needs_quantize_fp16():
    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(3, 4)
    try:
        lowered = kiln.torch.lower(model, (x,), fp16=True, min_island=1)
    except kiln.KilnNotImplementedError as error:
        assert "fp16=True" in str(error) and "quantize_fp16" in str(error)
        return
    with torch.no_grad():  # a build with quantize_fp16: half precision, close to fp32
        assert rel_error(lowered(x).float(), model(x)) <= 1e-2


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_aten_graph_from_make_fx(name):
    # An ATen-level graph as PyTorch's own tracer writes it (aten.convolution, native_batch_norm,
    # max_pool2d_with_indices, addmm, ...), lowered whole.
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)().eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        graph = make_fx(model)(x)
    lowered = kiln.torch.lower(graph, (x,))
    assert [n.target for n in lowered.graph.nodes if n.op == "call_module"] == ["fused_0"], \
        lowered.code
    with torch.no_grad():
        assert rel_error(lowered(x), model(x)) <= 1e-4
    assert any(n.op == "call_function" for n in graph.graph.nodes)  # the input was not rewritten
