// The drill's webhook check: every event converge delivered to the merchant's endpoint
// reached the receiver (`converge webhook-sink`, GET /received) at least once, answered 2xx,
// and each request the receiver got carries a valid Standard Webhooks signature, verified by
// the official library (npm `standardwebhooks`, installed by `npm ci` in end2end/), not by
// converge's own code.
//
//   node webhook_check.mjs SINK_URL SECRET EXPECTED_IDS_FILE
//
// EXPECTED_IDS_FILE: one event id per line (the endpoint's deliveries the database holds).
// Prints `webhooks: events=N received=N distinct=N missing=N bad_signature=N not_2xx=N
// duplicates=N` and exits 1 when an event is missing or a signature does not verify.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const [sinkUrl, secret, expectedFile] = process.argv.slice(2);
if (!sinkUrl || !secret || !expectedFile) {
  console.error("usage: node webhook_check.mjs SINK_URL SECRET EXPECTED_IDS_FILE");
  process.exit(2);
}
const here = path.dirname(fileURLToPath(import.meta.url));
let Webhook;
try {
  ({ Webhook } = createRequire(path.join(here, "../../end2end/package.json"))("standardwebhooks"));
} catch (e) {
  console.error(`webhook_check: npm standardwebhooks is missing (run npm ci in end2end/): ${e.message}`);
  process.exit(2);
}
const res = await fetch(`${sinkUrl}/received`);
if (!res.ok) {
  console.error(`webhook_check: ${sinkUrl}/received answered ${res.status}`);
  process.exit(2);
}
const { deliveries } = await res.json();
const wh = new Webhook(secret);
const ok = new Set();
const seen = new Map();
let badSignature = 0;
let not2xx = 0;
for (const d of deliveries) {
  seen.set(d.webhook_id, (seen.get(d.webhook_id) ?? 0) + 1);
  const headers = {
    "webhook-id": d.webhook_id,
    "webhook-timestamp": d.webhook_timestamp,
    "webhook-signature": d.webhook_signature,
  };
  // The library refuses a timestamp more than 5 minutes from its clock (replay protection,
  // checked by a receiver as a request arrives); a full drill is checked later than that, so
  // the check runs with the clock at the request's own timestamp.
  const realNow = Date.now;
  Date.now = () => Number(d.webhook_timestamp) * 1000;
  try {
    wh.verify(d.body, headers);
  } catch (e) {
    badSignature += 1;
    if (badSignature <= 5) console.error(`webhook_check: ${d.webhook_id}: ${e.message}`);
  } finally {
    Date.now = realNow;
  }
  if (d.answered >= 200 && d.answered < 300) ok.add(d.webhook_id);
  else not2xx += 1;
}
const expected = readFileSync(expectedFile, "utf8").split("\n").filter(Boolean);
const missing = expected.filter((id) => !ok.has(id));
for (const id of missing.slice(0, 5)) console.error(`webhook_check: event ${id} never reached the receiver with a 2xx`);
const duplicates = [...seen.values()].filter((n) => n > 1).length;
console.log(
  `webhooks: events=${expected.length} received=${deliveries.length} distinct=${seen.size} missing=${missing.length} bad_signature=${badSignature} not_2xx=${not2xx} duplicates=${duplicates}`,
);
process.exit(missing.length > 0 || badSignature > 0 ? 1 : 0);
