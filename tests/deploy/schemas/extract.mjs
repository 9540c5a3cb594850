// SPDX-License-Identifier: Apache-2.0
// Writes the openAPIV3Schema of one version of a CustomResourceDefinition (a YAML file of KServe's
// config/crd/full) as JSON without its "description" texts: the pinned copies in this folder.
//   NODE_PATH=<cache>/npm/node_modules node extract.mjs CRD.yaml VERSION OUT.json
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const YAML = require("yaml");
const [crdPath, version, out] = process.argv.slice(2);
const crd = YAML.parse(readFileSync(crdPath, "utf8"));
const entry = crd.spec.versions.find((v) => v.name === version);
if (!entry) throw new Error(`${crdPath}: no version ${version}`);

function strip(node) {
  if (Array.isArray(node)) return node.map(strip);
  if (node === null || typeof node !== "object") return node;
  const result = {};
  for (const [key, value] of Object.entries(node)) {
    // "description" is documentation, except where it names a property of the schema.
    if (key === "description" && typeof value === "string") continue;
    result[key] = key === "properties" ? Object.fromEntries(
      Object.entries(value).map(([name, schema]) => [name, strip(schema)])) : strip(value);
  }
  return result;
}
const schema = strip(entry.schema.openAPIV3Schema);
writeFileSync(out, JSON.stringify({
  group: crd.spec.group, kind: crd.spec.names.kind, version, schema }) + "\n");
