# SPDX-License-Identifier: Apache-2.0
# kiln.pipeline (rocAL/DALI API) on real image folders, compared with the C++ executor.
import ast
import glob
import inspect
import os

import numpy as np
import pytest
import torch
from PIL import Image

import kiln
import kiln.pipeline.fn as fn
import kiln.pipeline.types as types
from kiln import _kiln
from kiln.pipeline import Pipeline, pipeline_def
from conftest import run_checked, write_dataset

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def fn_of(name):
    f = fn
    for part in name.split("."):
        f = getattr(f, part)
    return f


def classification_pipe(root, batch_size=4, threads=2, seed=0, shuffle=False, crop=0,
                        policy="partial", resize=(32, 24)):
    pipe = Pipeline(batch_size=batch_size, num_threads=threads, seed=seed)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=shuffle,
                                        last_batch_policy=policy)
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        images = fn.resize(images, resize_x=resize[0], resize_y=resize[1])
        if crop:
            images = fn.crop_mirror_normalize(images, crop=[crop, crop], mean=MEAN, std=STD,
                                              mirror=fn.random.coin_flip(probability=0.5))
        pipe.set_outputs(images, labels)
    pipe.build()
    return pipe


def collect(pipe, epochs=1):
    batches = []
    for epoch in range(epochs):
        if epoch:
            pipe.reset()
        while True:
            try:
                out = pipe.run()
            except StopIteration:
                break
            batches.append([[np.array(t.at(i)) for i in range(len(t))] for t in out])
    return batches


@pytest.mark.parametrize("crop,shuffle", [(0, False), (16, True)])
def test_outputs_equal_the_cpp_pipeline(dataset, cpp_pipeline, tmp_path, crop, shuffle):
    out = tmp_path / "cpp"
    args = [cpp_pipeline, "--file-root", dataset, "--batch-size", "5", "--threads", "3",
            "--resize", "32x24", "--seed", "11", "--epochs", "2", "--out-dir", str(out)]
    if crop:
        args += ["--crop", str(crop)]
    if shuffle:
        args.append("--shuffle")
    run_checked(args)
    pipe = classification_pipe(dataset, batch_size=5, threads=1, seed=11, shuffle=shuffle,
                               crop=crop)
    batches = collect(pipe, epochs=2)
    assert len(batches) == 6  # 12 images, batches of 5 (partial last), two epochs
    n = 0
    for b, batch in enumerate(batches):
        epoch = b // 3
        for k, samples in enumerate(batch):
            for s, sample in enumerate(samples):
                expected = np.load(out / f"e{epoch}_b{b}_o{k}_s{s}.npy")
                assert sample.dtype == expected.dtype and sample.shape == expected.shape
                np.testing.assert_array_equal(sample, expected)
                n += 1
    assert n == len(glob.glob(str(out / "*.npy")))
    if crop:
        assert batches[0][0][0].shape == (3, crop, crop) and batches[0][0][0].dtype == np.float32
    else:
        assert batches[0][0][0].shape == (24, 32, 3) and batches[0][0][0].dtype == np.uint8


def test_decoded_png_equals_pil(tmp_path):
    root = tmp_path / "png"
    files = write_dataset(str(root), classes=1, per_class=(3,), png_every=1)
    pipe = Pipeline(batch_size=3, num_threads=2, seed=0)
    with pipe:
        data, labels = fn.readers.file(file_root=str(root))
        pipe.set_outputs(fn.decoders.image(data), labels)
    images, labels = pipe.run()
    assert not images.is_dense_tensor() or len(set(images.shape())) == 1
    for i, path in enumerate(files):
        np.testing.assert_array_equal(images.at(i), np.asarray(Image.open(path).convert("RGB")))
    assert labels.as_array().tolist() == [0, 0, 0]
    assert pipe.get_image_names() == files


def test_results_do_not_depend_on_thread_count(dataset):
    a = collect(classification_pipe(dataset, threads=1, seed=5, shuffle=True, crop=16))
    b = collect(classification_pipe(dataset, threads=4, seed=5, shuffle=True, crop=16))
    assert len(a) == len(b) == 3
    for x, y in zip(a, b):
        for xs, ys in zip(x, y):
            for u, v in zip(xs, ys):
                np.testing.assert_array_equal(u, v)
    c = collect(classification_pipe(dataset, threads=1, seed=6, shuffle=True, crop=16))
    assert any(not np.array_equal(u, v) for u, v in zip(a[0][0], c[0][0]))


def test_batches_are_numpy_views_and_torch_without_copy(dataset):
    pipe = classification_pipe(dataset, batch_size=4)
    images, labels = pipe.run()
    assert images.is_dense_tensor() and len(images) == 4
    array = images.as_array()
    assert array.shape == (4, 24, 32, 3) and array.dtype == np.uint8
    assert np.asarray(images.as_array()).ctypes.data == array.ctypes.data
    t = torch.from_dlpack(images)
    assert t.data_ptr() == array.ctypes.data
    assert torch.from_numpy(array).data_ptr() == array.ctypes.data
    np.testing.assert_array_equal(images[1], array[1])
    np.testing.assert_array_equal(images.at(-1), array[3])
    with pytest.raises(IndexError):
        images.at(4)
    assert labels.as_array().tolist() == [0, 0, 0, 0]
    assert images.dtype() == np.uint8
    assert images.as_cpu() is images  # DALI's names
    np.testing.assert_array_equal(images.as_tensor(), array)


def test_ragged_batches(dataset):
    pipe = Pipeline(batch_size=4, num_threads=2, seed=0)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=dataset)
        pipe.set_outputs(fn.decoders.image(jpegs))
    (images,) = pipe.run()
    assert not images.is_dense_tensor()
    shapes = images.shape()
    assert len(shapes) == 4 and len(set(shapes)) > 1
    with pytest.raises(kiln.KilnError, match="different shapes"):
        images.as_array()
    with pytest.raises(kiln.KilnError, match="different shapes"):
        images.as_tensor()
    with pytest.raises(kiln.KilnError, match="ragged"):
        torch.from_dlpack(images)
    assert images.at(2).shape == shapes[2]


@pytest.mark.parametrize("policy,sizes,padded", [
    ("partial", [5, 5, 2], [0, 0, 0]),
    ("drop", [5, 5], [0, 0]),
    ("fill", [5, 5, 5], [0, 0, 3]),
])
def test_last_batch_policies(dataset, policy, sizes, padded):
    pipe = classification_pipe(dataset, batch_size=5, policy=policy)
    assert pipe.epoch_size() == 12
    got, pads = [], []
    for _ in range(2):  # the same in the next epoch
        while True:
            try:
                images, labels = pipe.run()
            except StopIteration:
                break
            got.append(len(images))
            pads.append(pipe.get_last_batch_padded_size())
        pipe.reset()
    assert got == sizes * 2 and pads == padded * 2


def test_reset_mid_epoch_and_epochs_reshuffle(dataset):
    pipe = classification_pipe(dataset, batch_size=4, shuffle=True, seed=3)
    pipe.run()
    first = pipe.get_image_names()
    pipe.reset()
    assert pipe.epoch() == 1
    pipe.run()
    assert pipe.get_image_names() != first
    assert pipe.timing_info() and {"stage", "calls", "seconds"} <= set(pipe.timing_info()[0])


def test_pipeline_def_and_rocal_names(dataset):
    @pipeline_def
    def rocal_style(flip_horizontal, size):
        jpegs, labels = fn.readers.file(file_root=dataset)
        images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB,
                                   random_shuffle=False, shard_id=0, num_shards=2)
        images = fn.resize(images, resize_width=size, resize_height=size,
                           interpolation_type=types.LINEAR_INTERPOLATION)
        flipped = fn.flip(images, horizontal=flip_horizontal)
        return flipped, images, labels

    pipe = rocal_style(1, 20, batch_size=3, num_threads=2, device_id=0, seed=1)
    assert pipe.batch_size == 3 and pipe.reader_args()["num_shards"] == 2
    pipe.build()
    assert pipe.epoch_size() == 6  # shard 0 of 2
    flipped, images, labels = pipe.run()
    np.testing.assert_array_equal(flipped.as_array(), images.as_array()[:, :, ::-1])
    assert images.as_array().shape == (3, 20, 20, 3)


def test_define_graph_subclass(dataset):
    class Legacy(Pipeline):
        def define_graph(self):
            jpegs, labels = fn.readers.file(file_root=dataset, name="Reader")
            return fn.resize(fn.decoders.image(jpegs, device="mixed"), resize_shorter=16), labels

    pipe = Legacy(batch_size=2, num_threads=1, seed=0)
    pipe.build()
    images, labels = pipe.run()
    assert min(images.at(0).shape[:2]) == 16
    assert pipe.epoch_size("Reader") == 12


def test_bad_images_are_skipped_and_reported(dataset):
    bad = os.path.join(dataset, "class_0", "img_000.jpg")
    with open(bad, "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 truncated")
    pipe = classification_pipe(dataset, batch_size=4)
    n = sum(len(b[0]) for b in collect(pipe))
    assert n == 11
    reported = pipe.bad_samples()
    assert len(reported) == 1 and reported[0]["path"] == bad and reported[0]["reason"]

    strict = Pipeline(batch_size=4, num_threads=1, seed=0, bad_data="error")
    with strict:
        jpegs, labels = fn.readers.file(file_root=dataset)
        strict.set_outputs(fn.decoders.image(jpegs), labels)
    with pytest.raises(kiln.KilnError, match="img_000.jpg"):
        strict.run()


def test_user_errors_are_clear(dataset, tmp_path):
    with pytest.raises(kiln.KilnError, match="outside a pipeline"):
        fn.readers.file(file_root=dataset)
    pipe = Pipeline(batch_size=2)
    with pipe:
        jpegs, labels = fn.readers.file(file_root=dataset)
        with pytest.raises(kiln.KilnError, match="unknown argument \"size\""):
            fn.resize(jpegs, size=3)
        with pytest.raises(kiln.KilnError, match="expected 1 input"):
            fn.resize(resize_x=3)
        with pytest.raises(kiln.KilnError, match="must be a DataNode"):
            fn.resize(np.zeros(3), resize_x=3)
        with pytest.raises(kiln.KilnError, match="missing required argument.*crop"):
            fn.crop(jpegs)
        with pytest.raises(kiln.KilnError, match="not per-sample"):
            fn.resize(jpegs, interp_type=fn.random.coin_flip())
        images = fn.decoders.image(jpegs)
        pipe.set_outputs(fn.resize(images, resize_x=8, interp_type="bogus"))
    with pytest.raises(kiln.KilnError, match="interp_type \"bogus\""):
        pipe.build()

    missing = Pipeline(batch_size=2)
    with missing:
        jpegs, labels = fn.readers.file(file_root=str(tmp_path / "nowhere"))
        missing.set_outputs(labels)
    with pytest.raises(kiln.KilnError, match="nowhere"):
        missing.build()
    with pytest.raises(kiln.KilnError, match="nowhere"):
        missing.epoch_size()

    no_batch = Pipeline()
    with no_batch:
        jpegs, labels = fn.readers.file(file_root=dataset)
        no_batch.set_outputs(labels)
    with pytest.raises(kiln.KilnError, match="batch_size"):
        no_batch.build()

    with pytest.raises(kiln.KilnError, match="kwargs"):
        @pipeline_def
        def bad(**kwargs):
            return None


def test_fn_signatures_match_the_schemas():
    schemas = _kiln.operator_schemas()
    names = {s["name"] for s in schemas}
    assert {"readers.file", "decoders.image", "resize", "crop_mirror_normalize",
            "random.coin_flip", "random.uniform"} <= names
    assert sorted(fn.OPERATORS) == sorted(names)
    for schema in schemas:
        f = fn_of(schema["name"])
        params = inspect.signature(f).parameters
        inputs = [p for p in params.values() if p.kind == p.POSITIONAL_ONLY]
        kwonly = {p.name: p for p in params.values() if p.kind == p.KEYWORD_ONLY}
        assert [p.name for p in inputs] == schema["inputs"]
        assert set(kwonly) == {a["name"] for a in schema["args"]} | {"device"}
        for arg in schema["args"]:
            p = kwonly[arg["name"]]
            if arg["required"]:
                assert p.default is inspect.Parameter.empty
            else:
                assert p.default == arg["default"]
            assert arg["doc"] in f.__doc__
        assert schema["doc"][1:] in f.__doc__


def test_generated_stub_matches_the_schemas():
    stub = os.path.join(os.path.dirname(kiln.pipeline.__file__), "fn.pyi")
    tree = ast.parse(open(stub).read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    found[f"{node.name}.{member.name}"] = member
    schemas = _kiln.operator_schemas()
    assert set(found) == {s["name"] for s in schemas}
    for schema in schemas:
        func = found[schema["name"]]
        assert [a.arg for a in func.args.posonlyargs] == schema["inputs"]
        kw = [a.arg for a in func.args.kwonlyargs]
        assert kw == [a["name"] for a in schema["args"]] + ["device"]
        defaults = dict(zip(kw, func.args.kw_defaults))
        for arg in schema["args"]:
            d = defaults[arg["name"]]
            if arg["required"]:
                assert d is None
            else:
                assert ast.literal_eval(d) == arg["default"]


def test_types():
    assert types.RGB == "RGB" and types.BGR == "BGR" and types.GRAY == "GRAY"
    assert types.FLOAT == "float32" and types.FLOAT16 == "float16" and types.UINT8 == "uint8"
    assert types.NCHW == "NCHW" and types.NHWC == "NHWC"
    assert types.CPU == "cpu" and types.GPU == "gpu"
    assert types.INTERP_LINEAR == "linear" and types.INTERP_NN == "nearest"
    assert types.LAST_BATCH_FILL == types.LastBatchPolicy.FILL == "fill"
    assert types.LAST_BATCH_DROP == "drop" and types.LAST_BATCH_PARTIAL == "partial"
    assert repr(types.NCHW) == "types.NCHW"


@pytest.mark.skipif(not hasattr(fn, "rotate"), reason="this pipeline has no rotate operator")
def test_required_per_sample_argument_from_a_datanode(dataset):
    pipe = Pipeline(batch_size=4, num_threads=2, seed=2)
    with pipe:
        jpegs, _ = fn.readers.file(file_root=dataset)
        images = fn.resize(fn.decoders.image(jpegs), resize_x=32, resize_y=32)
        angle = fn.random.uniform(range=[10.0, 80.0])
        pipe.set_outputs(fn.rotate(images, angle=angle, keep_size=True), images, angle)
    rotated, images, angles = pipe.run()
    assert rotated.as_array().shape == (4, 32, 32, 3)
    assert all(10.0 <= float(a) < 80.0 for a in angles.as_array().ravel())
    assert not np.array_equal(rotated.as_array(), images.as_array())


def test_several_python_threads_share_one_pipeline(dataset):
    import threading

    pipe = classification_pipe(dataset, batch_size=2, threads=2, seed=1)
    labels, errors = [], []
    lock = threading.Lock()

    def consume():
        try:
            while True:
                try:
                    _, batch_labels = pipe.run()
                except StopIteration:
                    return
                with lock:
                    labels.extend(batch_labels.as_array().tolist())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(labels) == [0] * 5 + [1] * 4 + [2] * 3


def test_coco_boxes_follow_random_bbox_crop_and_flip(tmp_path):
    """fn.readers.coco + fn.random_bbox_crop + fn.slice + fn.bb_flip: every box that survives
    the crop and the flip still covers pixels of its category's colour."""
    import json
    colors = {1: (255, 0, 0), 2: (0, 255, 0)}
    images, annotations = [], []
    for i in range(4):
        w, h = 60 + 10 * i, 50
        pixels = np.full((h, w, 3), 128, np.uint8)
        for k, (x, y) in enumerate([(4, 6), (34, 20)]):
            pixels[y:y + 16, x:x + 20] = colors[k + 1]
            annotations.append({"id": len(annotations), "image_id": i, "category_id": k + 1,
                                "bbox": [x, y, 20, 16]})
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
        images.append({"id": i, "file_name": f"{i}.png", "width": w, "height": h})
    (tmp_path / "instances.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": [{"id": 1}, {"id": 2}]}))
    pipe = Pipeline(batch_size=4, num_threads=2, seed=3)
    with pipe:
        jpegs, boxes, labels, ids = fn.readers.coco(
            file_root=str(tmp_path), annotations_file=str(tmp_path / "instances.json"),
            ltrb=True, ratio=True)
        anchor, shape, boxes, labels = fn.random_bbox_crop(
            boxes, labels, thresholds=[0.3], scaling=[0.5, 1.0], aspect_ratio=[0.5, 2.0],
            num_attempts=50)
        images = fn.decoders.image_slice(jpegs, anchor, shape)
        mirror = fn.random.coin_flip()
        images = fn.flip(images, horizontal=mirror)
        boxes = fn.bb_flip(boxes, ltrb=True, horizontal=mirror)
        pipe.set_outputs(images, boxes, labels, ids)
    pipe.build()
    out_images, out_boxes, out_labels, out_ids = pipe.run()
    assert sorted(int(np.array(out_ids.at(i))[0]) for i in range(4)) == [0, 1, 2, 3]
    for i in range(4):
        img = np.array(out_images.at(i))
        bx, lb = np.array(out_boxes.at(i)), np.array(out_labels.at(i))
        assert len(bx) == len(lb) > 0
        assert ((bx >= 0) & (bx <= 1)).all()
        h, w = img.shape[:2]
        for (l, t, r, b), label in zip(bx, lb):
            cx, cy = int((l + r) / 2 * w), int((t + b) / 2 * h)
            assert tuple(img[cy, cx]) == colors[int(label)]


def test_device_gpu_runs_the_gpu_form_or_says_why_not(dataset):
    def build(device):
        pipe = Pipeline(batch_size=4, num_threads=2, seed=3)
        with pipe:
            jpegs, labels = fn.readers.file(file_root=dataset)
            images = fn.decoders.image(jpegs, device="mixed")
            images = fn.resize(images, resize_x=24, resize_y=20, device=device)
            out = fn.crop_mirror_normalize(images, crop=(16, 16), mean=[120.0], std=[60.0],
                                           device=device)
            pipe.set_outputs(out, labels)
        return pipe

    with pytest.raises(kiln.KilnError, match='device "tpu": expected "cpu", "gpu" or "mixed"'):
        build("tpu")
    cpu = build("cpu")
    cpu.build()
    expected = cpu.run()[0].as_array()
    gpu = build("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(kiln.KilnError, match='device "gpu" needs'):
            gpu.build()
        return
    gpu.build()
    np.testing.assert_allclose(gpu.run()[0].as_array(), expected, atol=1e-3)
