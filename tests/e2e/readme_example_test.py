#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Runs README.md's first example exactly as written (the commands between the readme-example
# markers, from the repository root) and checks what it prints: the class each bundled digit image
# is labelled with (its file name says it), as the README's expected output shows it. The README
# cannot drift from what kiln does. Also checks that the README starts with its two set-up
# commands, the second of which .ci/run runs.
# Usage (ctest e2e.readme_example): readme_example_test.py SOURCE_DIR PATH/TO/kiln
#   The README's commands name build/ci/tools/kiln; the kiln given here is run in its place.
import os
import re
import subprocess
import sys

README_KILN = "build/ci/tools/kiln"


def between(text, name):
    """The fenced block after <!-- NAME:begin --> and before <!-- NAME:end -->."""
    m = re.search(rf"<!-- {name}:begin -->\s*```(\w*)\n(.*?)```\s*<!-- {name}:end -->", text, re.S)
    if not m:
        sys.exit(f"readme_example_test: README.md has no ```...``` block between <!-- {name}:begin"
                 f" --> and <!-- {name}:end -->")
    return m.group(1), m.group(2)


def main():
    root, kiln = sys.argv[1], os.path.abspath(sys.argv[2])
    readme = open(os.path.join(root, "README.md")).read()

    # The set-up: the first code block holds exactly the two commands, as .ci/run expects.
    first = re.search(r"```sh\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first.splitlines()]
    assert [c for c in commands if c] == ["./scripts/dev example", "./scripts/dev test"], first
    ci = open(os.path.join(root, ".ci", "run")).read()
    assert "./scripts/dev test" in ci, ci

    language, script = between(readme, "readme-example")
    assert language == "sh", language
    assert README_KILN in script, script
    _, expected = between(readme, "readme-example-output")
    claims = re.findall(r"^(\S+): class (\d+) ", expected, re.M)
    assert claims, f"the expected output names no class:\n{expected}"
    images = re.findall(r"digit_images/\d+_label(\d)\.png", script)
    assert images, f"the example classifies no bundled digit image:\n{script}"

    print(f"$ (from {root}, {README_KILN} = {kiln})\n{script}", flush=True)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script.replace(README_KILN, kiln)],
                         cwd=root, capture_output=True, text=True, timeout=600)
    print(run.stdout + run.stderr)
    assert run.returncode == 0, f"the README's example failed with status {run.returncode}"
    printed = re.findall(r"^(\S+): class (\d+) ", run.stdout, re.M)
    # Every class the README says it prints is printed, and each is the image's true label.
    assert printed == claims, f"printed {printed}, the README shows {claims}"
    assert [int(c) for _, c in printed] == [int(label) for label in images], (printed, images)
    print(f"readme_example_test: the README's example classified {len(images)} digit image(s) "
          f"as labelled: {', '.join(label for label in images)}")


if __name__ == "__main__":
    main()
