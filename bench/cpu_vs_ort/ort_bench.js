// SPDX-License-Identifier: Apache-2.0
// Times one ONNX model on ONNX Runtime (onnxruntime-node) and prints one JSON line of figures.
// usage: node ort_bench.js MODULE_DIR MODEL.onnx --batch N --threads N --iterations N --warmup N
//        [--spinning 0|1] [--turns 1] [--input NAME=FILE.npy ...]
// Inputs not given by --input are random float32 (dynamic dims: the batch first, 1 after).
// With --turns 1 the timed runs come in turns, as kiln perf --turns: a count per line on standard
// input, that many runs, a line of JSON with their times; the usual line when the input ends.
'use strict';
const path = require('path');
const readline = require('readline');
const {readInputs} = require('./npy.js');

function parseArgs(argv) {
  const opts = {batch: 1, threads: 2, iterations: 10, warmup: 2, spinning: 1, turns: 0};
  if (argv.length < 2) throw new Error('usage: ort_bench.js MODULE_DIR MODEL.onnx [--batch N] ...');
  opts.moduleDir = argv[0];
  opts.model = argv[1];
  opts.inputs = [];
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (key === 'input') {
      opts.inputs.push(argv[i + 1]);
      continue;
    }
    if (!(key in opts)) throw new Error(`ort_bench: unknown option ${argv[i]}`);
    opts[key] = Number(argv[i + 1]);
  }
  return opts;
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1) + 0.5))];
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const ort = require(path.join(opts.moduleDir, 'node_modules', 'onnxruntime-node'));
  const createStart = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(opts.model, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    // ORT's threads spin between ops by default; 0 makes them block, like OMP_WAIT_POLICY=PASSIVE.
    extra: {session: {intra_op: {allow_spinning: String(opts.spinning)}}},
  });
  const createMs = Number(process.hrtime.bigint() - createStart) / 1e6;
  const feeds = readInputs(ort, opts.inputs);
  let seed = 1;
  for (const name of session.inputNames) {
    if (name in feeds) continue;
    const meta = session.inputMetadata.find((m) => m.name === name);
    const dims = meta.shape.map((d, i) => (typeof d === 'number' ? d : (i === 0 ? opts.batch : 1)));
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; ++i) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      data[i] = seed / 2147483648;
    }
    feeds[name] = new ort.Tensor('float32', data, dims);
  }
  const firstStart = process.hrtime.bigint();
  await session.run(feeds);
  const firstMs = Number(process.hrtime.bigint() - firstStart) / 1e6;
  for (let i = 1; i < opts.warmup; ++i) await session.run(feeds);
  const times = [];
  const cpuStart = process.cpuUsage();
  const timeRuns = async (n) => {
    for (let i = 0; i < n; ++i) {
      const start = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
  };
  if (opts.turns) {
    for await (const line of readline.createInterface({input: process.stdin})) {
      if (line.trim() === '') continue;
      const n = Number(line);
      if (!Number.isInteger(n) || n < 1) {
        throw new Error(`--turns: "${line}" on standard input is no count of runs`);
      }
      const before = times.length;
      const turnCpu = process.cpuUsage();
      await timeRuns(n);
      const c = process.cpuUsage(turnCpu);
      console.log(JSON.stringify({
        turn_times_ms: times.slice(before),
        cpu_ms_per_run: (c.user + c.system) / 1000 / n,
      }));
    }
    if (times.length === 0) throw new Error('--turns: standard input ended before the first turn');
  } else {
    await timeRuns(opts.iterations);
  }
  const cpu = process.cpuUsage(cpuStart);
  times.sort((a, b) => a - b);
  const median = quantile(times, 0.5);
  console.log(JSON.stringify({
    runtime: 'onnxruntime',
    version: ort.env.versions ? ort.env.versions.common : 'unknown',
    model: opts.model,
    batch: opts.batch,
    threads: opts.threads,
    spinning: opts.spinning,
    create_ms: createMs,
    first_run_ms: firstMs,
    iterations: times.length,
    median_ms: median,
    p90_ms: quantile(times, 0.9),
    throughput_per_s: (1000 * opts.batch) / median,
    // user + system CPU time of every thread per run (comparable with kiln's when both block)
    cpu_ms_per_run: (cpu.user + cpu.system) / 1000 / times.length,
    times_ms: times,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
  }));
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message}`);
  process.exit(1);
});
