# SPDX-License-Identifier: Apache-2.0
# kiln.torch.lower on modules torch.fx's symbolic tracing refuses: tracing with the sample shapes
# (kiln/torch/tracer.py), lowering by parts (kiln/torch/parts.py), in-place updates a graph would
# lose, tensors whose shape depends on the data; against PyTorch eager on real values, fp32.
import io
import logging

import pytest
import torch
from torch import fx, nn

import kiln
import kiln.torch
from kiln.torch.parts import LoweredPart
from kiln.torch.tracer import mutation_hazard, trace_with_shapes


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


def close(actual, expected, tolerance=1e-5):
    scale = expected.abs().max().clamp(min=1e-6)
    return ((actual - expected).abs().max() / scale).item() <= tolerance


class ShapeQuestions(nn.Module):
    """Unpacks shapes, branches on dims, iterates over a dimension: what SSDLite's head and RAFT
    do, and what symbolic tracing refuses."""

    def __init__(self):
        super().__init__()
        self.features = block(3, 8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = self.features(x)
        n, c, h, w = y.shape
        if y.dim() == 4 and len(y) == n:
            y = y.view(n, c, h * w).mean(dim=2)
        rows = [r * (i + 1) for i, r in enumerate(y)]
        return self.head(torch.stack(rows)) + float(h)


def test_shape_questions_are_answered_with_the_sample_shapes():
    model, x = ShapeQuestions().eval(), rand(2, 3, 12, 12)
    with pytest.raises(Exception):
        fx.symbolic_trace(model)
    lowered = kiln.torch.lower(model, (x,))
    # Traced whole (no part left in PyTorch), one kiln program.
    assert not [m for m in lowered.modules() if isinstance(m, LoweredPart)]
    assert [n.target for n in lowered.graph.nodes if n.op == "call_module"] == ["fused_0"]
    with torch.no_grad():
        assert close(lowered(x), model(x))


class Head(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(block(cin, cout), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.gain = 3.0  # read by the parent (as RAFT reads update_block.hidden_state_size)


class Branchy(nn.Module):
    """A branch on tensor values: no trace can stand for it, its parts can be lowered."""

    def __init__(self):
        super().__init__()
        self.backbone = block(3, 8)
        self.bright = Head(8, 8)
        self.dark = Head(8, 4)

    def forward(self, x):
        f = self.backbone(x)
        if x.mean() > 0:
            return self.bright(f) * self.bright.gain
        return self.dark(f)


def test_value_dependent_branch_is_lowered_by_parts():
    torch.manual_seed(0)
    model, x = Branchy().eval(), rand(1, 3, 16, 16).abs()
    lowered = kiln.torch.lower(model, (x,))
    parts = {m.name: m for m in lowered.modules() if isinstance(m, LoweredPart)}
    # The branch not taken on the sample inputs stays as it is.
    assert sorted(parts) == ["backbone", "bright"]
    assert isinstance(lowered.dark, Head)
    assert lowered.bright.gain == 3.0  # the original's attribute, through the part
    assert len(kiln.torch.kiln_islands(lowered)) == 2
    assert model.backbone is not lowered.backbone.original  # a copy: the model is untouched
    with torch.no_grad():
        assert close(lowered(x), model(x))
        dark = -x  # takes the other branch
        assert close(lowered(dark), model(dark))


def test_other_shapes_run_the_part_in_pytorch(caplog):
    torch.manual_seed(0)
    model, x = Branchy().eval(), rand(1, 3, 16, 16).abs()
    lowered = kiln.torch.lower(model, (x,))
    bigger = rand(2, 3, 20, 20, seed=1).abs()
    with caplog.at_level(logging.INFO, logger="kiln.torch"), torch.no_grad():
        assert close(lowered(bigger), model(bigger))
    assert "backbone called with arguments it was not lowered for (tensors [2, 3, 20, 20])" \
        in caplog.text


def test_parts_false_names_what_stopped_the_trace():
    model = Branchy().eval()
    with pytest.raises(kiln.torch.ConversionError) as error:
        kiln.torch.lower(model, (rand(1, 3, 16, 16),), parts=False)
    message = str(error.value)
    assert "Branchy.forward cannot be traced" in message
    assert "test_torch_parts.py" in message and "`if x.mean() > 0:`" in message
    assert "parts=True" in message


def test_parts_survive_torch_save():
    torch.manual_seed(0)
    model, x = Branchy().eval(), rand(1, 3, 16, 16).abs()
    lowered = kiln.torch.lower(model, (x,))
    buffer = io.BytesIO()
    torch.save(lowered, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), lowered(x), rtol=0, atol=0)
    assert len(kiln.torch.kiln_islands(loaded)) == 2


class Pasted(nn.Module):
    """Copies its input into a larger zero tensor in place, as torchvision's detection transform
    batches images: the graph records the copy_ but nothing that reads the result depends on it,
    so a lowered graph would drop it."""

    def __init__(self):
        super().__init__()
        self.net = block(3, 8)

    def forward(self, x):
        n, c, h, w = x.shape
        canvas = x.new_zeros(n, c, h + 4, w + 4)
        canvas[:, :, :h, :w].copy_(x)
        return self.net(canvas)


def test_in_place_update_of_a_view_is_not_lowered_whole():
    model, x = Pasted().eval(), rand(1, 3, 12, 12)
    hazard = mutation_hazard(trace_with_shapes(model, (x,)))
    assert hazard is not None and "copy_" in hazard and "view of new_zeros" in hazard
    assert "test_torch_parts.py" in hazard  # where
    lowered = kiln.torch.lower(model, (x,))
    assert [m.name for m in lowered.modules() if isinstance(m, LoweredPart)] == ["net"]
    with torch.no_grad():
        assert close(lowered(x), model(x))


def test_in_place_update_of_an_input_is_named():
    class Shifted(nn.Module):
        def forward(self, x):
            x.add_(1)
            return torch.relu(x)

    hazard = mutation_hazard(fx.symbolic_trace(Shifted()))
    assert hazard.startswith("call_method add_ (add_) updates an input (x) in place")


def test_an_in_place_update_nobody_reads_later_is_fine():
    class Clamped(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = block(3, 8)

        def forward(self, x):
            y = self.net(x)
            return y.clamp_(max=0.5) * 2

    model, x = Clamped().eval(), rand(1, 3, 12, 12)
    assert mutation_hazard(fx.symbolic_trace(model)) is None
    lowered = kiln.torch.lower(model, (x,))
    assert [n.target for n in lowered.graph.nodes if n.op == "call_module"] == ["fused_0"]
    with torch.no_grad():
        assert close(lowered(x), model(x))


class Masked(nn.Module):
    """The positive values, a count that depends on the data, then more computation."""

    def __init__(self):
        super().__init__()
        self.net = block(3, 4)

    def forward(self, x):
        y = self.net(x)
        picked = y[y > 0.2]
        return torch.sigmoid(picked * 2 + 1).sum() + y.mean()


def test_tensors_whose_shape_depends_on_the_data_stay_in_pytorch():
    model, x = Masked().eval(), rand(1, 3, 12, 12)
    lowered = kiln.torch.lower(model, (x,), min_island=1)
    assert len(kiln.torch.kiln_islands(lowered)) >= 1  # the convolutions
    with torch.no_grad():
        for seed in (1, 2, 3):  # other counts of picked values
            other = rand(1, 3, 12, 12, seed=seed)
            assert close(lowered(other), model(other))


def test_sizes_that_depend_on_the_data_stay_symbolic():
    class Counted(nn.Module):
        def forward(self, x):
            picked = x[x > 0]
            return torch.relu(x) * picked.shape[0]

    model, x = Counted(), rand(2, 3)
    graph = trace_with_shapes(model, (x,)).graph
    # The count is computed when the graph runs, not a constant of the sample.
    assert any(n.target is getattr and n.args[1] == "shape" for n in graph.nodes)
    lowered = kiln.torch.lower(model, (x,), min_island=1)
    with torch.no_grad():
        for seed in (1, 2, 3):
            other = rand(2, 3, seed=seed)
            assert close(lowered(other), model(other))

    class Looped(nn.Module):
        def forward(self, x):
            picked = x[x > 0]
            return sum(x * i for i in range(picked.shape[0]))  # Python iterates on it

    with pytest.raises(TypeError):
        trace_with_shapes(Looped(), (x,))
