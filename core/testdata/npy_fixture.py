# SPDX-License-Identifier: Apache-2.0
# Writes .npy fixtures with numpy for core/npy_test.cc and checks the .npy files kiln writes.
"""Usage: npy_fixture.py write DIR | check DIR

write: one .npy file per case below, as numpy writes it (byte order, Fortran order, header
       version and all).
check: loads <case>.npy files that kiln wrote for the same cases and exits non-zero unless each
       has the little-endian C-order dtype, the shape and the exact bytes expected.
The values must stay in sync with expected_cases() in core/npy_test.cc.
"""
import os
import sys

import numpy as np


def bf16(bits, shape):
    """bf16 the way numpy stores ml_dtypes.bfloat16 without the package: raw bits as '|V2'."""
    return np.array(bits, dtype="<u2").reshape(shape).view("V2")


# name -> (array as numpy writes it, header version or None for numpy's choice)
CASES = {
    "f16": (np.array([1.0, -2.5, 65504.0, 2.0**-24, 0.0999755859375, -0.0],
                     dtype="<f2").reshape(2, 3), None),
    "f32": (np.array([0.0, 1.5, -2.25, 3.4028234663852886e38, 1.401298464324817e-45,
                      np.inf], dtype="<f4").reshape(3, 2), None),
    "f64": (np.array([0.1, -1e300, 5e-324, np.pi], dtype="<f8"), None),
    "i8": (np.array([-128, -1, 0, 1, 127], dtype="|i1"), None),
    "u8": (np.arange(8, dtype="|u1").reshape(2, 2, 2) * np.uint8(36), None),
    "i16": (np.array([-32768, -2, 0, 300, 32767], dtype="<i2"), None),
    "u16": (np.array([0, 1, 255, 256, 65535], dtype="<u2"), None),
    "i32": (np.array([-2147483648, -7, 0, 123456789, 2147483647], dtype="<i4"), None),
    "u32": (np.array([0, 1, 4294967295, 3000000000], dtype="<u4"), None),
    "i64": (np.array([-9223372036854775808, -1, 0, 1234567890123456789,
                      9223372036854775807], dtype="<i8"), None),
    "u64": (np.array([0, 1, 18446744073709551615, 9223372036854775808], dtype="<u8"), None),
    "bool": (np.array([True, False, False, True, True], dtype="|b1"), None),
    "bf16": (bf16([0x3F80, 0xC000, 0x4049, 0x7F80, 0x0001, 0x7FC0], (2, 3)), None),
    "fortran_i32": (np.asfortranarray(np.arange(24, dtype="<i4").reshape(2, 3, 4)), None),
    "fortran_f64": (np.asfortranarray(
        np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype="<f8")), None),
    "big_endian_f32": ((np.arange(6).reshape(2, 3) * 1.25).astype(">f4"), None),
    "big_endian_i64": (np.array([1, -2, 0x0102030405060708], dtype=">i8"), None),
    "big_endian_f16": (np.array([1.0, -65504.0], dtype=">f2"), None),
    "scalar_f64": (np.array(3.5, dtype="<f8"), None),
    "empty_f32": (np.zeros((3, 0, 2), dtype="<f4"), None),
    "version2_u16": (np.array([[7, 8], [9, 10]], dtype="<u2"), (2, 0)),
    "version3_i8": (np.array([-5, 5], dtype="|i1"), (3, 0)),
}


def little_endian_c_order(arr):
    """What kiln writes for `arr`: the same values, little-endian, C order."""
    if arr.dtype.kind in "fiu" and arr.dtype.itemsize > 1:
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return np.array(arr, order="C", copy=True)  # ascontiguousarray would make a 0-d array 1-d


def write(directory):
    for name, (arr, version) in CASES.items():
        with open(os.path.join(directory, name + ".npy"), "wb") as f:
            np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def check(directory):
    errors = []
    for name, (arr, _) in CASES.items():
        path = os.path.join(directory, name + ".npy")
        want = little_endian_c_order(arr)
        try:
            with open(path, "rb") as f:
                major, _minor = np.lib.format.read_magic(f)
                if major == 1:
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                if f.tell() % 64 != 0:
                    errors.append(f"{name}: data starts at offset {f.tell()}, not a multiple of 64")
            got = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - any failure to load is a mismatch
            errors.append(f"{name}: cannot load: {e!r}")
            continue
        if fortran:
            errors.append(f"{name}: kiln wrote fortran_order True")
        if got.dtype.str != want.dtype.str:
            errors.append(f"{name}: dtype {got.dtype.str}, expected {want.dtype.str}")
        if got.shape != want.shape or tuple(shape) != want.shape:
            errors.append(f"{name}: shape {got.shape}, expected {want.shape}")
        if got.tobytes() != want.tobytes():
            errors.append(f"{name}: values {got!r}, expected {want!r}")
    for e in errors:
        print("npy_fixture check:", e, file=sys.stderr)
    return 1 if errors else 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ("write", "check") or not os.path.isdir(argv[2]):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "write":
        write(argv[2])
        return 0
    return check(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
