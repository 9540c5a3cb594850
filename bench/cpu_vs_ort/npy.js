// SPDX-License-Identifier: Apache-2.0
// Reads a .npy file (format 1.x or 2.x, C order, little-endian) into an onnxruntime-node tensor's
// parts: {type, data, shape}; what ort_bench.js and ort_profile.js feed for --input NAME=FILE.npy.
'use strict';
const fs = require('fs');

// numpy's dtype string -> ORT's tensor type and the typed array that holds it.
const kTypes = {
  '<f4': ['float32', Float32Array],
  '<f8': ['float64', Float64Array],
  '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array],
  '<i2': ['int16', Int16Array],
  '|i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array],
  '<u2': ['uint16', Uint16Array],
  '<u4': ['uint32', Uint32Array],
  '<u8': ['uint64', BigUint64Array],
  '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`${file}: not a .npy file (no \\x93NUMPY magic)`);
  }
  const major = buf[6];
  const headerStart = major === 1 ? 10 : 12;
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const header = buf.toString('latin1', headerStart, headerStart + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape) throw new Error(`${file}: a .npy header without descr or shape`);
  if (/'fortran_order':\s*True/.test(header)) {
    throw new Error(`${file}: Fortran order; save it with numpy.ascontiguousarray`);
  }
  const type = kTypes[descr[1]];
  if (!type) throw new Error(`${file}: dtype ${descr[1]} is not one ORT takes here`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map(Number);
  const bytes = buf.subarray(headerStart + headerLen);
  const copy = new ArrayBuffer(bytes.length);  // aligned for the typed array
  new Uint8Array(copy).set(bytes);
  return {type: type[0], data: new type[1](copy), shape: dims};
}

// {name: ort.Tensor} from ["NAME=FILE.npy", ...].
function readInputs(ort, assignments) {
  const feeds = {};
  for (const assignment of assignments) {
    const eq = assignment.lastIndexOf('=');
    if (eq <= 0) throw new Error(`--input "${assignment}": expected NAME=FILE.npy`);
    const npy = readNpy(assignment.slice(eq + 1));
    feeds[assignment.slice(0, eq)] = new ort.Tensor(npy.type, npy.data, npy.shape);
  }
  return feeds;
}

module.exports = {readNpy, readInputs};
