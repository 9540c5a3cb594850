// SPDX-License-Identifier: Apache-2.0
// Runs one ONNX model once on ONNX Runtime (onnxruntime-node) with inputs from .npy files and
// writes every output as .npy, plus outputs.json (the same layout as `kiln run --output-dir`).
// usage: node ort_run.js MODULE_DIR MODEL.onnx OUT_DIR NAME=FILE.npy... [--threads N]
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

// numpy dtype string (little-endian) <-> ORT tensor type and typed array.
const kTypes = {
  '<f4': ['float32', Float32Array],
  '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array],
  '<i2': ['int16', Int16Array],
  '|i1': ['int8', Int8Array],
  '|u1': ['uint8', Uint8Array],
  '<u2': ['uint16', Uint16Array],
  '<u4': ['uint32', Uint32Array],
  '<u8': ['uint64', BigUint64Array],
  '|b1': ['bool', Uint8Array],
  '<f2': ['float16', Uint16Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
      .filter((s) => s.length > 0).map(Number);
  const type = kTypes[descr];
  if (!type) throw new Error(`${file}: dtype ${descr} is not supported`);
  const bytes = buf.subarray(start);
  const copy = new ArrayBuffer(bytes.length);
  new Uint8Array(copy).set(bytes);
  let data = new type[1](copy);
  if (type[0] === 'bool') data = new Uint8Array(copy);
  return {type: type[0], data, shape};
}

function writeNpy(file, tensor) {
  const entry = Object.entries(kTypes).find(([, t]) => t[0] === tensor.type);
  if (!entry) throw new Error(`output of type ${tensor.type} cannot be written as .npy`);
  let header = `{'descr': '${entry[0]}', 'fortran_order': False, 'shape': (${
    tensor.dims.join(', ')}${tensor.dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

// A file name for a tensor name of any length or characters: the safe characters, at most 64 of
// them, then a short hash of the whole name.
function fileName(name) {
  const safe = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64);
  const hash = crypto.createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${safe}-${hash}.npy`;
}

async function main() {
  const args = process.argv.slice(2);
  let threads = 1;
  const positional = [];
  for (let i = 0; i < args.length; ++i) {
    if (args[i] === '--threads') {
      threads = Number(args[++i]);
    } else {
      positional.push(args[i]);
    }
  }
  if (positional.length < 3) {
    throw new Error('usage: ort_run.js MODULE_DIR MODEL.onnx OUT_DIR NAME=FILE.npy...');
  }
  const [moduleDir, model, outDir, ...inputs] = positional;
  const ort = require(path.join(moduleDir, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    extra: {session: {intra_op: {allow_spinning: '0'}}},
  });
  const feeds = {};
  for (const assignment of inputs) {
    const eq = assignment.lastIndexOf('=');
    if (eq <= 0) throw new Error(`input "${assignment}": expected NAME=FILE.npy`);
    const name = assignment.slice(0, eq);
    const npy = readNpy(assignment.slice(eq + 1));
    feeds[name] = new ort.Tensor(npy.type, npy.data, npy.shape);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, {recursive: true});
  const listed = [];
  for (const name of session.outputNames) {
    const t = results[name];
    const file = fileName(name);
    writeNpy(path.join(outDir, file), t);
    listed.push({name, file, dtype: t.type, shape: t.dims});
  }
  fs.writeFileSync(path.join(outDir, 'outputs.json'),
                   JSON.stringify({runtime: 'onnxruntime', version: ort.env.versions.common,
                                   outputs: listed}, null, 2) + '\n');
}

main().catch((e) => {
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
