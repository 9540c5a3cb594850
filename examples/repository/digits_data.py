#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# scikit-learn's 8x8 handwritten digits and the fixed train/test split train_digits.py trains on
# (also used by bench/quant/calibration_table.py to measure quantized accuracy on the held-out part).
# The digits come from scikit-learn's own data file: sklearn.datasets.load_digits when
# python3-sklearn is installed, else digits.csv.gz taken out of Debian's python3-sklearn package
# (`apt-get download`, no install: on Debian 12 python3-sklearn needs libboost1.74-dev, which
# conflicts with the libboost1.81-dev kiln builds with), cached under build/digits-data.
import glob
import gzip
import os
import subprocess
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))


def load_digits():
    """Returns (images [1797, 8, 8] float32 0..16, labels [1797] int64) from digits.csv.gz."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
        d = sklearn_digits()
        return d.images.astype(np.float32), d.target.astype(np.int64)
    except ImportError:
        pass
    cache = os.path.join(here, "..", "..", "build", "digits-data")
    found = glob.glob(os.path.join(cache, "**", "digits.csv.gz"), recursive=True)
    if not found:
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["apt-get", "download", "python3-sklearn"], cwd=tmp, check=True)
            deb = glob.glob(os.path.join(tmp, "python3-sklearn_*.deb"))[0]
            subprocess.run(["dpkg-deb", "-x", deb, cache], check=True)
        found = glob.glob(os.path.join(cache, "**", "digits.csv.gz"), recursive=True)
    with gzip.open(found[0]) as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)


def train_test_split():
    """((x_train, y_train), (x_test, y_test)): a seeded 75/25 split of load_digits()."""
    images, labels = load_digits()
    order = np.random.RandomState(0).permutation(len(labels))
    split = len(labels) * 3 // 4
    return ((images[order[:split]], labels[order[:split]]),
            (images[order[split:]], labels[order[split:]]))
