// Validates Kubernetes objects against the schemas kubernetes-models compiles
// from the Kubernetes OpenAPI spec: field types, required fields, enums and
// formats (not unknown fields: the OpenAPI spec allows them).
//
//   node validate.mjs OBJECTS.json
// OBJECTS.json: [{"file": ..., "object": {...}}, ...]. Prints one line per
// object; exits 1 when any is invalid or of a kind it cannot check.
import { readFileSync } from "node:fs";

const entries = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const { file, object } of entries) {
  const { apiVersion, kind } = object;
  const name = `${file}: ${kind} ${object.metadata?.name ?? "?"}`;
  // "v1" is the core group; "apps/v1" lives under apps/v1/.
  const modulePath = `kubernetes-models/${apiVersion}/${kind}`;
  let Model;
  try {
    Model = (await import(modulePath))[kind];
  } catch (e) {
    console.log(`FAIL ${name}: no schema for ${apiVersion} ${kind} (${e.code ?? e.message})`);
    failed++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
