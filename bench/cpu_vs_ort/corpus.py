# SPDX-License-Identifier: Apache-2.0
"""The real-model corpus (tests/corpus) as benchmark cases: each model's file in the corpus cache
(fetched and checked by tests/corpus/setup.py when missing) and its manifest inputs written once
as .npy files, which kiln perf and ort_bench.js both read with --input NAME=FILE.npy."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "tests", "corpus")
sys.path.insert(0, CORPUS)

import inputs as corpus_inputs  # noqa: E402
import setup as corpus_setup  # noqa: E402

# The models the benchmark runs by default: every kind of model in the corpus once (the wake-word
# heads are alike: two of them), the float16 variants, not the torchvision exports (tens of
# seconds a run on ref-sized machines; name them to run them).
DEFAULT = [
    "silero_vad_v4", "silero_vad_v5", "silero_vad_v6", "silero_vad_16k_op15", "silero_vad_half",
    "silero_vad_op18_ifless", "silero_vad_16k_op15_fp16", "oww_melspectrogram", "oww_embedding",
    "oww_embedding_fp16", "oww_hey_jarvis", "oww_alexa", "blazeface_front_128",
    "blazeface_back_256", "mlsd_320_tiny", "mlsd_512_tiny", "mlsd_320_large", "mlsd_512_large",
    "ppocr_mobile_cls", "ppocr_v4_rec", "ppocr_v4_det",
]


def default_cache():
    return corpus_setup.default_cache()


def select(spec, manifest):
    """The manifest's models that `spec` names: "default", "all" (all but the torchvision
    exports), "ci" (those CI runs) or comma-separated ids."""
    models = manifest["models"]
    if spec == "default":
        ids = DEFAULT
    elif spec == "all":
        ids = [m["id"] for m in models if "torchvision" not in m]
    elif spec == "ci":
        ids = [m["id"] for m in models if m.get("ci", True)]
    else:
        ids = [i for i in spec.split(",") if i]
    return corpus_setup.select_models(manifest, ids)


def cases(spec, cache):
    """[(id, model path, [NAME=FILE.npy, ...])] for the corpus models `spec` names, in manifest
    order; fetches what the cache lacks."""
    manifest = corpus_setup.load_manifest()
    models = select(spec, manifest)
    paths = corpus_setup.setup(cache, models, None)
    out = []
    for model in models:
        folder = os.path.join(cache, "bench", model["id"])
        os.makedirs(folder, exist_ok=True)
        feeds = []
        # A derived model (float16, external data) takes its source's inputs, as the corpus runs it.
        source = corpus_setup.source_of(manifest, model)
        arrays = corpus_inputs.make_inputs(
            dict(model, id=source["id"], inputs=model.get("inputs", source["inputs"])),
            manifest["seed"])
        for i, (name, array) in enumerate(arrays.items()):
            path = os.path.join(folder, f"input{i}.npy")
            np.save(path, array)
            feeds.append(f"{name}={path}")
        out.append((model["id"], paths[model["id"]], feeds))
    return out
