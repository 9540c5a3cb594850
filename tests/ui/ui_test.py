# SPDX-License-Identifier: Apache-2.0
"""kiln serve's status page in headless Chromium (ctest ui.status_page; docs/server.md).

1. the tools: `npm ci` of tests/ui/package-lock.json (puppeteer-core, pinned versions and hashes;
   --ignore-scripts, so no browser is downloaded) into a cache, redone only when the lock changes
   (the pattern of tests/deploy);
2. status_page_test.mjs: starts a real `kiln serve` on free ports over a copy of
   examples/repository plus a broken model, opens the page in Debian's chromium and checks what it
   shows while real requests run (see that file).

Exits 77 (ctest's skip) when chromium, node or npm is not installed; scripts/setup installs
chromium, and CI has node and npm. Anything else that goes wrong fails.

usage: ui_test.py PATH/TO/kiln [--cache DIR] [--chromium PATH]
"""

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
SKIP = 77


def default_cache():
    if os.environ.get("KILN_UI_CACHE"):
        return os.environ["KILN_UI_CACHE"]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "kiln", "ui")


def find_chromium(given):
    for name in [given, os.environ.get("KILN_CHROMIUM"), "chromium", "chromium-browser"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def setup_tools(cache):
    """node_modules of package-lock.json, in `cache`."""
    npm = os.path.join(cache, "npm")
    lock = os.path.join(HERE, "package-lock.json")
    cached_lock = os.path.join(npm, "installed-package-lock.json")  # written once npm ci is done
    modules = os.path.join(npm, "node_modules")
    if not (os.path.isdir(modules) and os.path.exists(cached_lock)
            and filecmp.cmp(lock, cached_lock, shallow=False)):
        print(f"ui: npm ci in {npm}", flush=True)
        shutil.rmtree(npm, ignore_errors=True)
        os.makedirs(npm)
        shutil.copy(os.path.join(HERE, "package.json"), npm)
        shutil.copy(lock, npm)
        result = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                                cwd=npm, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        if result.returncode != 0:
            sys.exit(f"FAIL: npm ci failed (the npm registry is needed once):\n{result.stdout}")
        shutil.copy(lock, cached_lock)
    return modules


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kiln")
    parser.add_argument("--cache", default=default_cache())
    parser.add_argument("--chromium")
    args = parser.parse_args()
    chromium = find_chromium(args.chromium)
    missing = [name for name, path in [("chromium", chromium), ("node", shutil.which("node")),
                                       ("npm", shutil.which("npm"))] if not path]
    if missing:
        print(f"SKIP: {' and '.join(missing)} not installed (scripts/setup installs chromium; "
              f"node and npm come from the nodejs and npm packages)")
        return SKIP
    start = time.monotonic()
    modules = setup_tools(os.path.abspath(args.cache))
    env = dict(os.environ, NODE_PATH=modules)
    result = subprocess.run(["node", os.path.join(HERE, "status_page_test.mjs"),
                             "--kiln", os.path.abspath(args.kiln), "--chromium", chromium,
                             "--examples", os.path.join(SOURCE, "examples")], env=env)
    print(f"ui: {time.monotonic() - start:.1f} s in all", flush=True)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
