#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Tests cmake/git_info.cmake, which writes the git commit `kiln --version` reports: on throwaway
# git repositories it must give the commit, mark uncommitted changes to tracked files, follow a new
# commit, leave an unchanged header untouched (so nothing recompiles), and say "unknown" for a
# source tree that is not a git checkout (a tarball, also one unpacked inside another repository)
# or when git is missing.
# Usage (ctest tools.git_info): git_info_test.py PATH/TO/cmake PATH/TO/git_info.cmake
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

CMAKE, SCRIPT = sys.argv[1], sys.argv[2]
GIT = shutil.which("git")


def git(repo, *args):
    return subprocess.run([GIT, "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def generate(source, header, git_path=None):
    """Runs the script; returns (commit, dirty) from the header it wrote."""
    git_path = GIT if git_path is None else git_path
    subprocess.run([CMAKE, f"-DSOURCE_DIR={source}", f"-DOUTPUT={header}", f"-DGIT={git_path}",
                    "-P", SCRIPT], check=True, capture_output=True)
    with open(header) as f:
        text = f.read()
    commit = re.search(r'#define KILN_GIT_COMMIT "([^"]*)"', text).group(1)
    dirty = re.search(r"#define KILN_GIT_DIRTY (true|false)", text).group(1) == "true"
    return commit, dirty


@unittest.skipIf(GIT is None, "git is not installed")
class GitInfo(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kiln_git_info_")
        self.repo = os.path.join(self.tmp, "src")
        os.makedirs(self.repo)
        git(self.repo, "init", "-q")
        with open(os.path.join(self.repo, "a.txt"), "w") as f:
            f.write("one\n")
        git(self.repo, "add", "a.txt")
        git(self.repo, "commit", "-q", "-m", "first")
        self.header = os.path.join(self.tmp, "git_info.h")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_commit_dirty_and_a_new_commit(self):
        first = git(self.repo, "rev-parse", "HEAD")
        self.assertEqual(generate(self.repo, self.header), (first, False))
        with open(os.path.join(self.repo, "untracked.txt"), "w") as f:
            f.write("scratch\n")  # untracked files (a build folder) are not a change
        self.assertEqual(generate(self.repo, self.header), (first, False))
        with open(os.path.join(self.repo, "a.txt"), "a") as f:
            f.write("two\n")
        self.assertEqual(generate(self.repo, self.header), (first, True))
        git(self.repo, "commit", "-q", "-am", "second")
        second = git(self.repo, "rev-parse", "HEAD")
        self.assertNotEqual(first, second)
        self.assertEqual(generate(self.repo, self.header), (second, False))

    def test_an_unchanged_header_is_not_rewritten(self):
        generate(self.repo, self.header)
        os.utime(self.header, ns=(1_000_000_000, 1_000_000_000))  # long ago
        generate(self.repo, self.header)
        self.assertEqual(os.stat(self.header).st_mtime_ns, 1_000_000_000)
        git(self.repo, "commit", "-q", "--allow-empty", "-m", "another")
        generate(self.repo, self.header)
        self.assertGreater(os.stat(self.header).st_mtime_ns, 1_000_000_000)

    def test_a_tree_without_git_is_unknown(self):
        tarball = os.path.join(self.tmp, "unpacked")
        shutil.copytree(self.repo, tarball, ignore=shutil.ignore_patterns(".git"))
        self.assertEqual(generate(tarball, self.header), ("unknown", False))

    def test_a_tree_unpacked_inside_another_repository_is_unknown(self):
        inside = os.path.join(self.repo, "vendor", "kiln")
        os.makedirs(inside)
        with open(os.path.join(inside, "CMakeLists.txt"), "w") as f:
            f.write("# not this repository's source\n")
        self.assertEqual(generate(inside, self.header), ("unknown", False))

    def test_without_git_it_is_unknown(self):
        self.assertEqual(generate(self.repo, self.header, git_path=""), ("unknown", False))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
