# SPDX-License-Identifier: Apache-2.0
# What the bench/quant scripts share: finding the kiln binary and writing their JSON record.
import datetime
import json
import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_kiln():
    """build/release/tools/kiln, else build/ci/tools/kiln, else None."""
    for build in ("release", "ci"):
        path = os.path.join(ROOT, "build", build, "tools", "kiln")
        if os.path.exists(path):
            return path
    return None


def write_record(path, **fields):
    """Writes fields plus the date, commit and host as JSON to `path`."""
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:  # no git (the GPU machine)
        commit = ""
    record = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": commit,
              "host": platform.node(), **fields}
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"\nwrote {path}")
