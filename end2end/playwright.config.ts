import { defineConfig } from "@playwright/test";

// Debian's Chromium, never a downloaded browser (the machine has no network for that).
const chromium = process.env.CONVERGE_CHROMIUM ?? "/usr/bin/chromium";
const baseURL = process.env.CONVERGE_E2E_URL ?? "http://127.0.0.1:3000";

export default defineConfig({
  testDir: "./tests",
  // A test's own limit only guards against a hang; each step waits at most `expect.timeout`.
  // The tours take 20 to 31 s on a slow 2-CPU host (navigation.spec.ts: about 45 page loads;
  // layout.spec.ts: every page at one width; keyboard.spec.ts), Playwright's 30 s default
  // failed the navigation tour there on its last page (2026-12-03).
  timeout: 60_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: !!process.env.CI,
  retries: 0,
  // CONVERGE_E2E_REPORT (scripts/test.sh): a JSON report beside the list, from which the test
  // command prints the failed tests once more after cargo-leptos's own output, so a CI log that
  // keeps only its tail still says which test failed and why.
  reporter: process.env.CONVERGE_E2E_REPORT
    ? [["list"], ["json", { outputFile: process.env.CONVERGE_E2E_REPORT }]]
    : [["list"]],
  outputDir: "test-results",
  use: {
    baseURL,
    viewport: { width: 1280, height: 800 },
    trace: "off",
    launchOptions: {
      executablePath: chromium,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
});
