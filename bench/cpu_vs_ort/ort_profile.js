// SPDX-License-Identifier: Apache-2.0
// Runs one ONNX model on ONNX Runtime (onnxruntime-node) with its profiler on and prints one JSON
// line: each node's median kernel time in ms over the runs after the first `--skip`.
// usage: node ort_profile.js MODULE_DIR MODEL.onnx [--batch N] [--threads N] [--runs N] [--skip N]
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function parseArgs(argv) {
  const opts = {batch: 1, threads: 2, runs: 35, skip: 5};
  if (argv.length < 2) throw new Error('usage: ort_profile.js MODULE_DIR MODEL.onnx [...]');
  opts.moduleDir = argv[0];
  opts.model = argv[1];
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in opts)) throw new Error(`ort_profile: unknown option ${argv[i]}`);
    opts[key] = Number(argv[i + 1]);
  }
  return opts;
}

function median(values) {
  const v = [...values].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = require(path.join(opts.moduleDir, 'node_modules', 'onnxruntime-node'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile_'));
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableProfiling: true,
    profileFilePrefix: path.join(dir, 'profile'),
  });
  const feeds = {};
  let seed = 1;
  for (const name of session.inputNames) {
    const meta = session.inputMetadata.find((m) => m.name === name);
    const dims = meta.shape.map((d, i) => (typeof d === 'number' ? d : (i === 0 ? opts.batch : 1)));
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; ++i) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      data[i] = seed / 2147483648;
    }
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  for (let i = 0; i < opts.runs; ++i) await session.run(feeds);
  await session.endProfiling();
  await session.release();
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
  if (files.length !== 1) throw new Error(`ort_profile: no profile file in ${dir}`);
  const events = JSON.parse(fs.readFileSync(path.join(dir, files[0]), 'utf8'));
  fs.rmSync(dir, {recursive: true, force: true});
  const perNode = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!perNode.has(name)) perNode.set(name, {op: e.args.op_name, ms: []});
    perNode.get(name).ms.push(e.dur / 1000);
  }
  const nodes = [];
  for (const [name, n] of perNode) {
    nodes.push({node: name, op: n.op, ms: median(n.ms.slice(opts.skip))});
  }
  console.log(JSON.stringify({runtime: 'onnxruntime', model: opts.model, nodes}));
}

main().catch((e) => {
  console.error(`ort_profile: ${e.message}`);
  process.exit(1);
});
