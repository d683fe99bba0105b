// Time to interactive of the console in Chromium (issue 15, "Console first load"): a benchmark,
// not a test. Run by bench/console.sh (part 7); by hand:
//
//   node end2end/perf/tti.mjs --url http://127.0.0.1:3000 --user NAME --password-env VAR [--runs 7]
//
// It lives outside end2end/tests, so `npx playwright test` never runs it. Each run opens a new
// browser context (empty cache, no service worker, no session) and reads the page's own
// `performance` timeline:
//   - response_end: the document's last byte (navigation timing responseEnd);
//   - dcl: domContentLoadedEventEnd; load: loadEventEnd;
//   - wasm: responseEnd of the `.wasm` resource (its last byte arrived);
//   - hydrated: the "converge:hydrated" mark, set by app/src/lib.rs `hydrate()` once
//     hydration has finished (views hydrated, lazy pages loaded, handlers attached): the page is interactive.
// All in ms from navigationStart, and first contentful paint (`fcp`). Pages: the sign-in page
// (`login`, signed out), the dashboard (`dashboard`, `/` with the session cookie of a sign-in
// done in another context, so its cache is cold too), and the approvals page on a phone
// (`approvals`, 390 x 844, over the `4g` and `3g` profiles below; the user must hold the
// approver role). Profiles: `local` (no throttling: the CPU-bound part, WebAssembly
// compile and hydration) and `net` (Chromium's network emulation at 10 Mbit/s down, 40 ms
// round trip: what the bytes cost on an ordinary connection).
//
// Prints `label.<page>.<profile>.<metric>_ms=<median>` lines (medians of --runs), plus the
// run count and the wasm's transferred bytes, for bench/console.sh to put in BENCHMARKS.md.
import { chromium } from "@playwright/test";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (fallback === undefined) throw new Error(`--${name} is required`);
  return fallback;
}

const url = arg("url").replace(/\/$/, "");
const user = arg("user");
const password = process.env[arg("password-env")];
if (!password) throw new Error("the variable named by --password-env is empty");
const runs = Number.parseInt(arg("runs", "7"), 10);
const label = arg("label", "tti");
const executablePath = process.env.CONVERGE_CHROMIUM ?? "/usr/bin/chromium";

const profiles = {
  local: null,
  net: { offline: false, latency: 40, downloadThroughput: (10e6 / 8), uploadThroughput: (5e6 / 8) },
};

// The phone approver (issue 41): the approvals page at 390 x 844 over Chromium DevTools' own
// presets (front_end/core/sdk/NetworkManager.ts): "Fast 4G" (9 Mbit/s down, 1.5 up, 60 ms x
// 2.75 latency, each x 0.9) and "Slow 4G", formerly "Fast 3G" (1.6 Mbit/s down, 750 kbit/s
// up, 150 ms x 3.75, each x 0.9).
const phoneProfiles = {
  "4g": { offline: false, latency: 165, downloadThroughput: (9e6 / 8) * 0.9, uploadThroughput: (1.5e6 / 8) * 0.9 },
  "3g": { offline: false, latency: 562.5, downloadThroughput: (1.6e6 / 8) * 0.9, uploadThroughput: (750e3 / 8) * 0.9 },
};
const phone = { width: 390, height: 844 };

/** One cold load of `path` in a new context; returns the timeline figures (ms). */
async function measure(browser, path, storageState, conditions, viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ storageState, viewport });
  try {
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    await cdp.send("Network.enable");
    await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
    if (conditions) await cdp.send("Network.emulateNetworkConditions", conditions);
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url + path, { waitUntil: "load" });
    await page.waitForFunction(() => performance.getEntriesByName("converge:hydrated").length > 0, null, {
      timeout: 60_000,
    });
    if (errors.length) throw new Error(`page errors on ${path}: ${errors.join("; ")}`);
    const t = await page.evaluate(() => {
      const nav = performance.getEntriesByType("navigation")[0];
      const wasm = performance.getEntriesByType("resource").find((r) => r.name.endsWith(".wasm"));
      const mark = performance.getEntriesByName("converge:hydrated")[0];
      const fcp = performance.getEntriesByName("first-contentful-paint")[0];
      return {
        fcp: fcp ? fcp.startTime : NaN,
        path: new URL(nav.name).pathname,
        response_end: nav.responseEnd,
        dcl: nav.domContentLoadedEventEnd,
        load: nav.loadEventEnd,
        wasm: wasm ? wasm.responseEnd : NaN,
        wasm_bytes: wasm ? wasm.transferSize : NaN,
        hydrated: mark.startTime,
      };
    });
    return t;
  } finally {
    await context.close();
  }
}

/** Signs in through the sign-in page and returns the session (cookies) for later contexts. */
async function session(browser) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(url + "/login");
    await page.waitForSelector('main.login[data-hydrated="true"]');
    await page.getByLabel("Username").fill(user);
    await page.getByLabel("Password").fill(password);
    await page.getByTestId("sign-in").click();
    await page.waitForSelector('header.topbar[data-hydrated="true"]');
    return await context.storageState();
  } finally {
    await context.close();
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const signedIn = await session(browser);
  const pages = {
    login: ["/login", undefined, profiles],
    dashboard: ["/", signedIn, profiles],
    // An approver on a phone: the page is visible at first contentful paint and its Approve
    // works once hydrated (the user signs in with the approver role).
    approvals: ["/approvals", signedIn, phoneProfiles, phone],
  };
  for (const [name, [path, state, set, viewport]] of Object.entries(pages)) {
    for (const [profile, conditions] of Object.entries(set)) {
      await measure(browser, path, state, conditions, viewport); // warm-up: Chromium's own start-up costs
      const all = [];
      for (let i = 0; i < runs; i++) all.push(await measure(browser, path, state, conditions, viewport));
      if (all.some((r) => r.path !== path)) {
        throw new Error(`${name}: landed on ${all.map((r) => r.path).join(", ")}, not ${path}`);
      }
      const k = `${label}.${name}.${profile}`;
      console.log(`${k}.runs=${runs}`);
      for (const metric of ["response_end", "fcp", "dcl", "load", "wasm", "hydrated"]) {
        console.log(`${k}.${metric}_ms=${median(all.map((r) => r[metric])).toFixed(0)}`);
      }
      console.log(`${k}.wasm_transfer_bytes=${median(all.map((r) => r.wasm_bytes))}`);
    }
  }
} finally {
  await browser.close();
}
