#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# rocAL's "Create Pipeline Instance" example run by kiln: a file reader, an image decoder and a
# resize, consumed through ROCALClassificationIterator. Only the import lines differ from rocAL's
# (`from amd.rocal.pipeline import Pipeline`, `import amd.rocal.fn as fn`, ...).
# Usage: /usr/bin/python3 examples/python/rocal_create_pipeline.py IMAGE_DIR [--batch-size 4]
import argparse

from kiln.pipeline import Pipeline
from kiln.pipeline.plugin.pytorch import ROCALClassificationIterator
import kiln.pipeline.fn as fn
import kiln.pipeline.types as types

parser = argparse.ArgumentParser()
parser.add_argument("image_dir", help="a folder with one sub-folder of images per class")
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--num-threads", type=int, default=2)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--rocal-cpu", action="store_true", default=True)
parser.add_argument("--NHWC", action="store_true")
parser.add_argument("--fp16", action="store_true")
args = parser.parse_args()

data_path = args.image_dir
pipe = Pipeline(batch_size=args.batch_size, num_threads=args.num_threads, device_id=0,
                seed=args.seed, rocal_cpu=args.rocal_cpu,
                tensor_layout=types.NHWC if args.NHWC else types.NCHW,
                tensor_dtype=types.FLOAT16 if args.fp16 else types.FLOAT)
with pipe:
    jpegs, _ = fn.readers.file(file_root=data_path)
    images = fn.decoders.image(jpegs, file_root=data_path, device="cpu", output_type=types.RGB,
                               shard_id=0, num_shards=1, random_shuffle=True)
    images = fn.resize(images, device="cpu", resize_width=300, resize_height=300)
    pipe.set_outputs(images)
pipe.build()

imageIterator = ROCALClassificationIterator(pipe)
for epoch in range(2):
    for i, (image_batch, labels) in enumerate(imageIterator, 0):
        print(f"epoch {epoch} batch {i}: images {tuple(image_batch[0].shape)} "
              f"{image_batch[0].dtype}")
    imageIterator.reset()
print("done")
