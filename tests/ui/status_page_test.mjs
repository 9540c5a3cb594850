// SPDX-License-Identifier: Apache-2.0
// kiln serve's status page in headless Chromium, read from the DOM (its data- attributes), never
// from pixels. A real `kiln serve` (free ports, --ui-port 0, --model-control-mode explicit) serves
// a copy of examples/repository plus a model whose config is broken; the test checks that
//   - the page loads on the UI port and on the HTTP port with no console error, no CSP
//     violation, no failed request and no error response;
//   - the model list shows every model with its state, backend and the broken one's reason;
//   - under real inference load (node's http, a few seconds) the throughput chart gains samples
//     and shows a rate that agrees with what the client measured, and latency gets values;
//   - a request with a wrong input name appears among the recent errors, with the model, the
//     status and the server's message, as does the broken model's load failure;
//   - a model unloaded through the repository API shows as UNAVAILABLE ("unloaded");
//   - SIGTERM stops the server with status 0.
// Run by ui_test.py (which installs puppeteer-core): node status_page_test.mjs --kiln PATH
// --chromium PATH --examples DIR
import {spawn} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {parseArgs} from "node:util";

const require = createRequire(process.env.NODE_PATH + "/");
const puppeteer = require("puppeteer-core");

const {values: args} = parseArgs({
  options: {kiln: {type: "string"}, chromium: {type: "string"}, examples: {type: "string"}},
});
const started = Date.now();
const interval = 250;  // the page's poll interval (?interval_ms), ms

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

function check(condition, message) {
  if (!condition) fail(message);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Polls `probe` until it returns a truthy value; fails with `what` after `ms`.
async function waitFor(what, probe, ms = 20000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) return last;
    await sleep(50);
  }
  fail(`timed out after ${ms} ms waiting for ${what}`);
}

function request(port, method, target, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({host: "127.0.0.1", port, method, path: target,
                              headers: {"Content-Type": "application/json"}}, (res) => {
      let data = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (data += chunk));
      res.on("end", () => resolve({status: res.statusCode, headers: res.headers, body: data}));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// The repository: examples/repository's digits models and a model whose config is broken.
function makeRepository() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "kiln_ui_"));
  for (const model of ["digits", "digits_pipeline", "digits_chain"]) {
    fs.cpSync(path.join(args.examples, "repository", model), path.join(root, model),
              {recursive: true});
  }
  fs.mkdirSync(path.join(root, "broken", "1"), {recursive: true});
  fs.writeFileSync(path.join(root, "broken", "config.toml"), "backend = \"echo\"\nmax_batch = 4\n");
  return root;
}

// A held-out digit (examples/digit_images, an 8x8 PGM of grey levels 0..16) as digits' input.
function digitRequest(file) {
  const pgm = fs.readFileSync(path.join(args.examples, "digit_images", file));
  const pixels = pgm.subarray(pgm.length - 64);
  return JSON.stringify({inputs: [{name: "image", shape: [1, 1, 8, 8], datatype: "FP32",
                                   data: Array.from(pixels, (v) => v / 16)}]});
}

function startServer(repository, cacheDir) {
  const server = spawn(args.kiln, ["serve", "--repository", repository, "--host", "127.0.0.1",
                                   "--http-port", "0", "--grpc-port", "-1", "--ui-port", "0",
                                   "--threads", "2", "--model-control-mode", "explicit"],
                       {env: {...process.env, KILN_CACHE_DIR: cacheDir},
                        stdio: ["ignore", "pipe", "pipe"]});
  let output = "";
  const ports = new Promise((resolve, reject) => {
    const look = () => {
      const httpPort = output.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      const uiPort = output.match(/status page on http:\/\/127\.0\.0\.1:(\d+)\//);
      if (httpPort && uiPort) resolve({http: Number(httpPort[1]), ui: Number(uiPort[1])});
    };
    server.stdout.on("data", (d) => ((output += d), look()));
    server.stderr.on("data", (d) => (output += d));
    server.on("exit", (code) => reject(new Error(`kiln serve exited ${code}:\n${output}`)));
  });
  const exited = new Promise((resolve) => server.on("exit", (code, signal) =>
                                                       resolve({code, signal})));
  return {server, ports, exited, output: () => output};
}

// Everything the page does that counts as a problem: console errors and warnings, uncaught
// exceptions, CSP violations, failed requests and error responses.
function watch(page, problems) {
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warn") problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`response ${r.status()}: ${r.url()}`);
  });
}

async function openPage(browser, port, problems) {
  const page = await browser.newPage();
  watch(page, problems);
  // Runs outside the page's CSP (DevTools), so it sees violations the page itself could not log.
  await page.evaluateOnNewDocument(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  const response = await page.goto(`http://127.0.0.1:${port}/?interval_ms=${interval}`,
                                   {waitUntil: "load"});
  check(response.status() === 200, `GET / on port ${port}: ${response.status()}`);
  const headers = response.headers();
  check(headers["content-type"] === "text/html; charset=utf-8",
        `content-type ${headers["content-type"]}`);
  const csp = headers["content-security-policy"] || "";
  check(csp.includes("script-src 'sha256-") && !csp.includes("unsafe"), `CSP "${csp}"`);
  return page;
}

const polls = (page) => page.$eval("#poll-state", (e) => Number(e.dataset.polls));

async function modelRows(page) {
  return page.$$eval("#models tbody tr[data-model]", (rows) => rows.map((r) => ({
    name: r.dataset.model,
    state: r.dataset.state,
    backend: r.querySelector('[data-field="backend"]').textContent,
    reason: r.querySelector('[data-field="reason"]').textContent,
  })));
}

async function chart(page, model, kind) {
  return page.$eval(`canvas[data-chart="${kind}"][data-model="${model}"]`, (c) => ({
    points: Number(c.dataset.points),
    last: c.dataset.last === "" ? null : Number(c.dataset.last),
    max: Number(c.dataset.max),
  }));
}

async function main() {
  const repository = makeRepository();
  const cacheDir = process.env.KILN_CACHE_DIR || path.join(repository, "..",
                                                            path.basename(repository) + "_cache");
  const kiln = startServer(repository, cacheDir);
  let browser;
  try {
    const ports = await kiln.ports;
    console.log(`ui: kiln serve on http ${ports.http}, status page ${ports.ui} ` +
                `(${Date.now() - started} ms)`);
    const launchArgs = ["--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"];
    // Chromium's sandbox cannot start as root (containers); it is the only reason to turn it off.
    if (process.getuid && process.getuid() === 0) launchArgs.push("--no-sandbox");
    browser = await puppeteer.launch({executablePath: args.chromium, headless: true,
                                      args: launchArgs});
    const problems = [];
    const page = await openPage(browser, ports.ui, problems);
    await waitFor("two polls of the status", async () => (await polls(page)) >= 2);

    // The models and their states.
    const rows = await modelRows(page);
    const byName = Object.fromEntries(rows.map((r) => [r.name, r]));
    check(JSON.stringify(rows.map((r) => r.name)) ===
              JSON.stringify(["broken", "digits", "digits_chain", "digits_pipeline"]),
          `model rows ${JSON.stringify(rows)}`);
    for (const [name, backend] of [["digits", "compiler"], ["digits_pipeline", "pipeline"],
                                   ["digits_chain", "chain"]]) {
      check(byName[name].state === "READY" && byName[name].backend === backend,
            `${name}: ${JSON.stringify(byName[name])}`);
    }
    check(byName.broken.state === "FAILED" && byName.broken.reason.includes("max_batch"),
          `broken: ${JSON.stringify(byName.broken)}`);
    check(await page.$eval("#server-ready", (e) => e.dataset.ready) === "false",
          "the server shows as ready with a broken model");

    // Load: 4 clients send held-out digits to digits for 3 s.
    const before = await chart(page, "digits", "throughput");
    const bodies = fs.readdirSync(path.join(args.examples, "digit_images"))
                       .filter((f) => f.endsWith(".pgm")).sort().map(digitRequest);
    check(bodies.length > 0, "no digit images");
    let answered = 0;
    const loadStart = Date.now();
    const loadMs = 3000;
    const clients = Array.from({length: 4}, async (_, k) => {
      for (let i = k; Date.now() - loadStart < loadMs; i += 4) {
        const r = await request(ports.http, "POST", "/v2/models/digits/infer",
                                bodies[i % bodies.length]);
        check(r.status === 200, `inference: ${r.status} ${r.body}`);
        answered += 1;
      }
    });
    let during = before;
    let latency = null;
    const rates = new Map();  // the page's samples taken while the load ran, by sample number
    while (Date.now() - loadStart < loadMs) {
      await sleep(interval / 2);
      during = await chart(page, "digits", "throughput");
      // The first new sample's interval began before the load did.
      if (during.points > before.points + 1 && during.last !== null) {
        rates.set(during.points, during.last);
      }
      const l = await chart(page, "digits", "latency");
      if (l.last !== null) latency = l;
    }
    await Promise.all(clients);
    const clientRate = answered / ((Date.now() - loadStart) / 1000);
    await sleep(2 * interval);
    during = await chart(page, "digits", "throughput");
    const pageRate = [...rates.values()].reduce((a, v) => a + v, 0) / Math.max(1, rates.size);
    console.log(`ui: ${answered} inferences in ${loadMs} ms (${clientRate.toFixed(0)}/s by the ` +
                `client); the page's throughput chart: ${during.points - before.points} new ` +
                `samples, ${pageRate.toFixed(0)}/s on average while the load ran, peak ` +
                `${during.max.toFixed(0)}/s`);
    check(during.points >= before.points + 8,
          `the throughput chart gained ${during.points - before.points} samples in ${loadMs} ms`);
    check(during.max > 0 && rates.size >= 4, "the throughput chart shows no rate under load");
    // Each of the page's rates is the server's count over the server's clock between two polls;
    // over the load their mean is the client's rate (the load ramps up, so not any one sample).
    check(pageRate >= 0.5 * clientRate && pageRate <= 2 * clientRate,
          `the page's rate ${pageRate}/s is far from the client's ${clientRate}/s`);
    check(latency !== null && latency.last > 0, `latency chart ${JSON.stringify(latency)}`);
    const rateCell = await page.$eval('#models tr[data-model="digits"] [data-field="throughput"]',
                                      (e) => e.textContent);
    check(rateCell !== "" && rateCell !== "\u2013", `throughput cell "${rateCell}"`);

    // A failed request shows among the recent errors.
    const bad = await request(ports.http, "POST", "/v2/models/digits/infer",
                              JSON.stringify({inputs: [{name: "nope", shape: [1, 1, 8, 8],
                                                        datatype: "FP32",
                                                        data: new Array(64).fill(0)}]}));
    check(bad.status === 400, `a wrong input name: ${bad.status} ${bad.body}`);
    const message = JSON.parse(bad.body).error;
    const errorRow = await waitFor("the failed request among the recent errors", () =>
        page.$$eval("#errors tbody tr[data-sequence]", (rows, message) => rows.map((r) => ({
          kind: r.dataset.kind, model: r.dataset.model, code: r.dataset.code,
          status: r.children[3].textContent, message: r.children[4].textContent,
        })).find((e) => e.kind === "request" && e.message === message), message));
    check(errorRow.model === "digits" && errorRow.code === "INVALID_ARGUMENT" &&
              errorRow.status.startsWith("400"),
          `error row ${JSON.stringify(errorRow)}`);
    const loadError = await page.$$eval('#errors tbody tr[data-kind="load"]',
                                        (rows) => rows.map((r) => r.dataset.model));
    check(loadError.includes("broken"), `load errors ${JSON.stringify(loadError)}`);

    // Unloaded through the repository API: UNAVAILABLE, and no more throughput.
    const unload = await request(ports.http, "POST", "/v2/repository/models/digits/unload", "");
    check(unload.status === 200, `unload: ${unload.status} ${unload.body}`);
    const unloaded = await waitFor("digits shown as unavailable", async () => {
      const row = (await modelRows(page)).find((r) => r.name === "digits");
      return row && row.state === "UNAVAILABLE" ? row : null;
    });
    check(unloaded.reason === "unloaded", `unloaded row ${JSON.stringify(unloaded)}`);
    await sleep(2 * interval);
    check((await chart(page, "digits", "throughput")).last === 0,
          "an unloaded model still shows throughput");

    // The HTTP port serves the same page.
    const second = await openPage(browser, ports.http, problems);
    await waitFor("a poll on the HTTP port", async () => (await polls(second)) >= 1);
    check(await second.$eval("#poll-state", (e) => e.dataset.pollError) === "",
          "the page on the HTTP port cannot read the status");

    check(problems.length === 0, `the page had problems:\n  ${problems.join("\n  ")}`);
    await browser.close();
    browser = null;
    kiln.server.kill("SIGTERM");
    const end = await kiln.exited;
    check(end.code === 0, `kiln serve ended with ${JSON.stringify(end)}:\n${kiln.output()}`);
    console.log(`ui: PASS in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    if (browser) await browser.close().catch(() => {});
    if (kiln.server.exitCode === null) kiln.server.kill("SIGKILL");
    fs.rmSync(repository, {recursive: true, force: true});
    if (!process.env.KILN_CACHE_DIR) fs.rmSync(cacheDir, {recursive: true, force: true});
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error(`FAIL: ${e.stack || e}`);
  process.exitCode = 1;
});
