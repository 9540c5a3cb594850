// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes manifests (YAML files, several documents each) against published schemas:
// built-in kinds with kubernetes-models (generated from Kubernetes' OpenAPI: types, required
// fields, enums) plus @kubernetes/client-node's field tables of every type (an unknown field is
// an error, as with kubectl's strict field validation); KServe kinds against the pinned CRD
// schemas in schemas/ (ajv; an unknown field is an error unless the schema preserves unknown
// fields). Prints one line per document; exits 1 when any is invalid.
//   NODE_PATH=<node_modules> node validate.mjs FILE...
//   NODE_PATH=<node_modules> node validate.mjs --json FILE...   (the documents as JSON, unchecked)
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const modules = process.env.NODE_PATH;
if (!modules) throw new Error("set NODE_PATH to the node_modules folder of tests/deploy/package.json");
const require = createRequire(join(modules, "noop.js"));
const YAML = require("yaml");
const Ajv = require("ajv");
const here = dirname(fileURLToPath(import.meta.url));

function documents(file) {
  return YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d, i) => {
    if (d.errors.length) throw new Error(`${file} document ${i + 1}: ${d.errors[0].message}`);
    return d.toJS();
  }).filter((d) => d !== null);
}

// @kubernetes/client-node's generated models: each type's fields (JSON names and types).
const modelsDir = join(modules, "@kubernetes", "client-node", "dist", "gen", "models");
const fieldTables = new Map();
function fields(type) {
  if (!fieldTables.has(type)) {
    const file = join(modelsDir, `${type}.js`);
    let table = null;
    if (existsSync(file)) {
      const m = readFileSync(file, "utf8").match(/\.attributeTypeMap = (\[[\s\S]*?\]);/);
      if (m) table = new Map(JSON.parse(m[1]).map((a) => [a.baseName, a.type]));
    }
    fieldTables.set(type, table);
  }
  return fieldTables.get(type);
}

// Unknown fields of `value` read as `type`, as "path: message" strings.
function unknownFields(value, type, path, out) {
  if (value === null || value === undefined) return;
  const array = type.match(/^Array<(.+)>$/);
  if (array) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, array[1], `${path}/${i}`, out));
    return;
  }
  const map = type.match(/^\{ \[key: string\]: (.+); \}$/);
  if (map) {
    if (typeof value === "object") {
      for (const [k, v] of Object.entries(value)) unknownFields(v, map[1], `${path}/${k}`, out);
    }
    return;
  }
  const table = fields(type);
  if (!table || typeof value !== "object" || Array.isArray(value)) return;
  for (const [key, v] of Object.entries(value)) {
    if (!table.has(key)) {
      out.push(`${path || "/"}: unknown field "${key}" (${type} has ${[...table.keys()].join(", ")})`);
    } else {
      unknownFields(v, table.get(key), `${path}/${key}`, out);
    }
  }
}

// client-node's class for apiVersion + kind: "apps/v1" Deployment -> V1Deployment.
function modelType(apiVersion, kind) {
  const version = apiVersion.split("/").pop();
  const v = version.charAt(0).toUpperCase() + version.slice(1);
  return fields(`${v}${kind}`) ? `${v}${kind}` : null;
}

async function validateBuiltIn(doc) {
  const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/")
                                                        : [null, doc.apiVersion];
  const file = join(modules, "kubernetes-models", ...(group ? [group] : []), version,
                    `${doc.kind}.js`);
  if (!existsSync(file)) return [`no published schema for ${doc.apiVersion} ${doc.kind}`];
  const Model = (await import(pathToFileURL(file)))[doc.kind];
  const errors = [];
  try {
    new Model(doc).validate();
  } catch (e) {
    for (const err of e.errors ?? [{ instancePath: "", message: e.message }]) {
      errors.push(`${err.instancePath || "/"}: ${err.message}`);
    }
  }
  const type = modelType(doc.apiVersion, doc.kind);
  if (!type) return [...errors, `no field table for ${doc.apiVersion} ${doc.kind}`];
  unknownFields(doc, type, "", errors);
  return errors;
}

// The pinned KServe schemas, with additionalProperties: false wherever properties are listed and
// unknown fields are not preserved (the API server prunes or rejects them).
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (schema === null || typeof schema !== "object") return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = k === "properties"
      ? Object.fromEntries(Object.entries(v).map(([name, s]) => [name, strict(s)])) : strict(v);
  }
  if (out.properties && out.additionalProperties === undefined &&
      !out["x-kubernetes-preserve-unknown-fields"]) {
    out.additionalProperties = false;
  }
  return out;
}
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const crdValidators = new Map();
for (const name of ["servingruntime.v1alpha1.json", "inferenceservice.v1beta1.json"]) {
  const crd = JSON.parse(readFileSync(join(here, "schemas", name), "utf8"));
  crdValidators.set(`${crd.group}/${crd.version} ${crd.kind}`, ajv.compile(strict(crd.schema)));
}

async function validate(doc) {
  if (!doc.apiVersion || !doc.kind) return ["no apiVersion or kind"];
  const crd = crdValidators.get(`${doc.apiVersion} ${doc.kind}`);
  if (!crd) {
    if (doc.apiVersion.includes(".") && !doc.apiVersion.includes("k8s.io/")) {
      return [`no pinned schema for ${doc.apiVersion} ${doc.kind} (tests/deploy/schemas)`];
    }
    return validateBuiltIn(doc);
  }
  const errors = [];
  if (!crd(doc)) {
    for (const err of crd.errors) {
      const extra = err.params?.additionalProperty ? ` "${err.params.additionalProperty}"` : "";
      errors.push(`${err.instancePath || "/"}: ${err.message}${extra}`);
    }
  }
  unknownFields(doc.metadata ?? {}, "V1ObjectMeta", "/metadata", errors);
  return errors;
}

const args = process.argv.slice(2);
if (args[0] === "--json") {
  console.log(JSON.stringify(args.slice(1).flatMap((f) => documents(f).map((doc) => ({ file: f, doc })))));
  process.exit(0);
}
let bad = 0, count = 0;
for (const file of args) {
  for (const doc of documents(file)) {
    const errors = await validate(doc);
    count++;
    const what = `${file}: ${doc.kind ?? "?"} ${doc.metadata?.name ?? "?"} (${doc.apiVersion ?? "?"})`;
    if (errors.length) {
      bad++;
      console.log(`INVALID ${what}`);
      for (const e of errors.slice(0, 20)) console.log(`  ${e}`);
    } else {
      console.log(`valid   ${what}`);
    }
  }
}
console.log(`${count - bad} valid, ${bad} invalid`);
process.exit(bad || count === 0 ? 1 : 0);
