# SPDX-License-Identifier: Apache-2.0
"""The kiln wheel, built offline with Debian's setuptools from kiln's CMake build.

    /usr/bin/python3 -m pip install --no-build-isolation ./python     # into a venv
    /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -w dist ./python

The native parts come from a CMake build folder: $KILN_BUILD_DIR when set (e.g. build/ci, whose
targets are brought up to date; relative to the repository root), else build/wheel, configured here (Release, no tests, no
benchmarks; KILN_CUDA=OFF|ON|AUTO passes through). The wheel holds the pure-Python package, the
extension kiln._kiln, the generated kiln/pipeline/fn.pyi and kiln/client/grpc_predict_v2_pb2.py,
and the `kiln` CLI as a script. It links Debian 12's shared libraries (oneDNN, protobuf, ...), so
it is a linux_x86_64 wheel for Debian 12, not a manylinux one. docs/deploy.md has the details.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from distutils.command.build_scripts import build_scripts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VERSION = re.search(r'^__version__ = "([^"]+)"', (HERE / "kiln" / "__init__.py").read_text(),
                    re.M).group(1)


def build_dir():
    # pip runs this file from a folder of its choosing: a relative KILN_BUILD_DIR is taken from
    # the repository root.
    return (ROOT / os.environ.get("KILN_BUILD_DIR", "build/wheel")).resolve()


def cmake(args):
    try:
        subprocess.run(args, check=True)
    except FileNotFoundError:
        raise SystemExit("kiln wheel: cmake is not installed; scripts/setup installs what kiln "
                         "builds with (Debian 12)")
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"kiln wheel: `{' '.join(args)}` failed with status {error.returncode} "
                         "(its output is above)")


def cmake_build():
    """Configures (when needed) and builds the targets the wheel packs; returns the folder."""
    folder = build_dir()
    if not (folder / "CMakeCache.txt").exists():
        cmake(["cmake", "-S", str(ROOT), "-B", str(folder), "-G", "Ninja",
               "-DCMAKE_BUILD_TYPE=Release", "-DKILN_BUILD_TESTS=OFF", "-DKILN_BUILD_BENCH=OFF",
               "-DKILN_CUDA=" + os.environ.get("KILN_CUDA", "AUTO")])
    jobs = os.environ.get("KILN_JOBS") or str(os.cpu_count() or 1)
    cmake(["cmake", "--build", str(folder), "-j", jobs, "--target", "kiln_python_package", "kiln"])
    return folder


class CMakeBuildExt(build_ext):
    """Builds with CMake and copies the extension and the generated modules into the package."""

    def run(self):
        folder = cmake_build()
        package = folder / "python" / "kiln"
        target = Path(self.build_lib) / "kiln"
        extensions = sorted(package.glob("_kiln*.so"))
        if len(extensions) != 1:
            raise SystemExit(f"kiln wheel: expected one kiln/_kiln*.so in {package}, found "
                             f"{[e.name for e in extensions]}")
        for source, relative in [(extensions[0], extensions[0].name),
                                 (package / "pipeline" / "fn.pyi", "pipeline/fn.pyi"),
                                 (package / "client" / "grpc_predict_v2_pb2.py",
                                  "client/grpc_predict_v2_pb2.py")]:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / relative)


class CliScript(build_scripts):
    """The `kiln` CLI (a native program: distutils' script copy reads scripts as text)."""

    def run(self):
        cli = cmake_build() / "tools" / "kiln"
        os.makedirs(self.build_dir, exist_ok=True)
        destination = os.path.join(self.build_dir, "kiln")
        shutil.copyfile(cli, destination)
        os.chmod(destination, 0o755)


# setuptools' intermediate folders go into the CMake build folder, not the source tree.
intermediate = build_dir() / "python-setuptools"
intermediate.mkdir(parents=True, exist_ok=True)
setup(
    name="kiln",
    version=VERSION,
    description="kiln: compiles neural networks, prepares their inputs and serves them",
    license="Apache-2.0",
    python_requires=">=3.11",
    install_requires=["numpy"],
    extras_require={"grpc": ["grpcio", "protobuf"], "torch": ["torch"]},
    packages=find_packages(include=["kiln", "kiln.*"]),
    ext_modules=[Extension("kiln._kiln", sources=[])],
    scripts=["kiln"],
    cmdclass={"build_ext": CMakeBuildExt, "build_scripts": CliScript},
    options={"build": {"build_base": str(intermediate / "build")},
             "egg_info": {"egg_base": str(intermediate)}},
    zip_safe=False,
)
