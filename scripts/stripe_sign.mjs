#!/usr/bin/env node
// Signs a Stripe webhook payload the way Stripe does, for converge's Stripe connector tests:
// prints the value of the `Stripe-Signature` header ("t=<timestamp>,v1=<hex HMAC-SHA256>") made
// by the official `stripe` npm library's `stripe.webhooks.generateTestHeaderString`, so the
// tests check converge's verifier against Stripe's own code, not against a second copy of ours.
//
// Usage:
//   node scripts/stripe_sign.mjs --secret whsec_... [--timestamp 1700000000] < payload.json
//   (scripts/stripe_fakes.sh exports its path as CONVERGE_STRIPE_SIGNER; it is executable,
//   so `"$CONVERGE_STRIPE_SIGNER" --secret S --timestamp T < payload` works as well.)
//
// The payload is stdin byte for byte (no trimming: a trailing newline is part of what is
// signed). --timestamp is in Unix seconds; without it the library uses the current time.
// Prints the header value and one newline on stdout; exits 2 on bad arguments.
//
// `stripe` is pinned in tools/package.json (installed by `npm ci` in tools/, which
// scripts/setup.sh and scripts/stripe_fakes.sh run); it is loaded from tools/node_modules,
// since this file lives outside that package.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tools/package.json', import.meta.url));
const Stripe = require('stripe');

function usage(msg) {
  process.stderr.write(`stripe_sign: ${msg}\nusage: stripe_sign.mjs --secret S [--timestamp T] < payload\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let secret;
let timestamp;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const value = () => (i + 1 < args.length ? args[++i] : usage(`${a} needs a value`));
  if (a === '--secret') secret = value();
  else if (a === '--timestamp') timestamp = value();
  else usage(`unknown argument ${a}`);
}
if (!secret) usage('--secret is required');
if (timestamp !== undefined && !/^\d+$/.test(timestamp)) usage('--timestamp must be Unix seconds');

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const payload = Buffer.concat(chunks).toString('utf8');

// The webhook helpers need no API key and make no request; the key is only a placeholder.
const stripe = new Stripe('sk_test_signer_only');
const header = stripe.webhooks.generateTestHeaderString({
  payload,
  secret,
  ...(timestamp !== undefined ? { timestamp: Number(timestamp) } : {}),
});
process.stdout.write(`${header}\n`);
