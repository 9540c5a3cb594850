# SPDX-License-Identifier: Apache-2.0
# kiln.pipeline.plugin.pytorch: the DALI- and rocAL-style iterators, last-batch policies, resets
# and sharding across torch.distributed ranks (two real processes over gloo).
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import kiln
import kiln.pipeline.fn as fn
import kiln.pipeline.types as types
from kiln.pipeline import Pipeline
from kiln.pipeline.plugin.pytorch import (ClassificationIterator, DALIClassificationIterator,
                                          DALIGenericIterator, GenericIterator, LastBatchPolicy,
                                          ROCALClassificationIterator, ROCALGenericIterator)
from conftest import write_dataset


def make_pipe(root, batch_size=5, seed=0, shuffle=False, **kwargs):
    pipe = Pipeline(batch_size=batch_size, num_threads=2, seed=seed, **kwargs)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=shuffle)
        images = fn.resize(fn.decoders.image(jpegs), resize_x=16, resize_y=12)
        pipe.set_outputs(images, labels)
    return pipe


def test_classification_iterator_yields_torch_batches(dataset):
    pipe = make_pipe(dataset, tensor_layout=types.NHWC, tensor_dtype=types.UINT8)
    it = ClassificationIterator(pipe, reader_name="Reader",
                                last_batch_policy=LastBatchPolicy.PARTIAL)
    steps = list(it)
    assert [len(s[0]["label"]) for s in steps] == [5, 5, 2]
    data = steps[0][0]["data"]
    assert isinstance(data, torch.Tensor) and data.dtype == torch.uint8
    assert tuple(data.shape) == (5, 12, 16, 3)
    labels = torch.cat([s[0]["label"] for s in steps]).tolist()
    assert labels == [0] * 5 + [1] * 4 + [2] * 3
    assert len(it) == 3 and it.epoch_size() == 12


def test_layout_dtype_and_normalization(dataset):
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    raw = make_pipe(dataset, tensor_layout=types.NHWC, tensor_dtype=types.UINT8)
    raw.build()
    images, _ = raw.run()
    expected = (images.as_array().astype(np.float32) - mean) / std
    expected = expected.transpose(0, 3, 1, 2)
    pipe = make_pipe(dataset, tensor_layout=types.NCHW, tensor_dtype=types.FLOAT, mean=mean,
                     std=std)
    step = next(iter(GenericIterator(pipe, ["x", "y"])))[0]
    assert step["x"].dtype == torch.float32 and tuple(step["x"].shape) == (5, 3, 12, 16)
    np.testing.assert_allclose(step["x"].numpy(), expected, rtol=1e-5, atol=1e-5)
    half = make_pipe(dataset, tensor_dtype=types.FLOAT16)
    step = next(iter(GenericIterator(half, ["x", "y"])))[0]
    assert step["x"].dtype == torch.float16 and tuple(step["x"].shape) == (5, 3, 12, 16)


@pytest.mark.parametrize("policy,sizes", [
    (LastBatchPolicy.FILL, [5, 5, 5]),
    (LastBatchPolicy.DROP, [5, 5]),
    (LastBatchPolicy.PARTIAL, [5, 5, 2]),
])
def test_last_batch_policies_and_reset(dataset, policy, sizes):
    it = ClassificationIterator(make_pipe(dataset), last_batch_policy=policy)
    assert len(it) == len(sizes)
    for _ in range(3):
        assert [len(s[0]["label"]) for s in it] == sizes
        with pytest.raises(StopIteration):
            next(it)
        it.reset()


def test_fill_last_batch_legacy_flag_and_auto_reset(dataset):
    assert DALIClassificationIterator is ClassificationIterator
    assert DALIGenericIterator is GenericIterator
    it = DALIClassificationIterator(make_pipe(dataset), fill_last_batch=False, auto_reset=True)
    first = [len(s[0]["label"]) for s in it]
    second = [len(s[0]["label"]) for s in it]
    assert first == second == [5, 5, 2]


def test_rocal_iterators(dataset):
    pipe = make_pipe(dataset, batch_size=4, tensor_layout=types.NCHW, tensor_dtype=types.FLOAT)
    it = ROCALClassificationIterator(pipe)
    total = 0
    for images, labels in it:
        assert isinstance(images, list) and len(images) == 1
        assert tuple(images[0].shape) == (4, 3, 12, 16) and images[0].dtype == torch.float32
        assert labels.dtype == torch.int32 and len(labels) == 4
        total += 1
    assert total == 3
    it.reset()
    assert sum(1 for _ in it) == 3

    only = Pipeline(batch_size=6, num_threads=1, seed=0)
    with only:
        jpegs, _ = fn.readers.file(file_root=dataset)
        only.set_outputs(fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=8))
    gen = ROCALGenericIterator(only, tensor_layout=types.NHWC, tensor_dtype=types.FLOAT,
                               multiplier=[0.5, 0.5, 0.5], offset=[1.0, 1.0, 1.0])
    images, labels = next(gen)
    assert labels is None and tuple(images[0].shape) == (6, 8, 8, 3)
    only_raw = Pipeline(batch_size=6, num_threads=1, seed=0)
    with only_raw:
        jpegs, _ = fn.readers.file(file_root=dataset)
        only_raw.set_outputs(fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=8))
    (raw,) = only_raw.run()
    np.testing.assert_allclose(images[0].numpy(), raw.as_array() * 0.5 + 1.0, rtol=1e-5)
    with pytest.raises(kiln.KilnError, match="device"):
        ROCALClassificationIterator(make_pipe(dataset), device="cuda")


def test_output_map_must_match(dataset):
    it = GenericIterator(make_pipe(dataset), ["only_one"])
    with pytest.raises(kiln.KilnError, match="output_map"):
        next(it)


def test_ragged_outputs_come_as_lists(dataset):
    pipe = Pipeline(batch_size=3, num_threads=1, seed=0, tensor_layout=types.NHWC,
                    tensor_dtype=types.UINT8)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=dataset)
        pipe.set_outputs(fn.decoders.image(jpegs), labels)
    step = next(GenericIterator(pipe, ["data", "label"], dynamic_shape=True))[0]
    assert isinstance(step["data"], list) and len(step["data"]) == 3
    assert all(isinstance(t, torch.Tensor) and t.shape[-1] == 3 for t in step["data"])


SHARD_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch.distributed as dist
    import kiln.pipeline.fn as fn
    from kiln.pipeline import Pipeline
    from kiln.pipeline.plugin.pytorch import ClassificationIterator
    rank, root, init = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    pipe = Pipeline(batch_size=2, num_threads=1, seed=4)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True)
        pipe.set_outputs(fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=8), labels)
    it = ClassificationIterator(pipe, last_batch_policy="partial")
    paths = []
    for _ in it:
        paths += pipe.get_image_names()
    print(json.dumps({"rank": rank, "paths": paths, "size": it.epoch_size()}))
    dist.barrier()
    dist.destroy_process_group()
""")


def test_sharding_across_torch_distributed_ranks(tmp_path):
    root = tmp_path / "images"
    files = write_dataset(str(root), per_class=(4, 3, 4))
    script = tmp_path / "shard.py"
    script.write_text(SHARD_SCRIPT)
    init = f"file://{tmp_path}/rendezvous"
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(root), init],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ))
             for rank in range(2)]
    import json
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    a, b = results[0]["paths"], results[1]["paths"]
    assert results[0]["size"] + results[1]["size"] == len(files)
    assert not set(a) & set(b)
    assert sorted(a + b) == files


def test_generic_plugin_yields_numpy(dataset):
    from kiln.pipeline.plugin import generic

    pipe = make_pipe(dataset, batch_size=4, tensor_layout=types.NCHW, tensor_dtype=types.FLOAT,
                     mean=[128.0] * 3, std=[64.0] * 3)
    steps = list(generic.ClassificationIterator(pipe))
    assert len(steps) == 3
    data, label = steps[0][0]["data"], steps[0][0]["label"]
    assert isinstance(data, np.ndarray) and data.shape == (4, 3, 12, 16)
    assert data.dtype == np.float32 and label.tolist() == [0, 0, 0, 0]
    torch_pipe = make_pipe(dataset, batch_size=4, tensor_layout=types.NCHW,
                           tensor_dtype=types.FLOAT, mean=[128.0] * 3, std=[64.0] * 3)
    first = next(ClassificationIterator(torch_pipe))[0]["data"]
    np.testing.assert_array_equal(first.numpy(), data)
    images, labels = next(generic.ROCALClassificationIterator(make_pipe(dataset, batch_size=4)))
    assert isinstance(images[0], np.ndarray) and isinstance(labels, np.ndarray)
