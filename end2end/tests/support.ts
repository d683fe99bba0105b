// Shared helpers of the console tests: who signs in, and how payments are made through the
// merchant API. scripts/test.sh creates the users and merchants with the `converge` CLI
// before the server starts and passes their passwords and API keys in the environment.
import * as fs from "node:fs";
import * as path from "node:path";
import AxeBuilder from "@axe-core/playwright";
import { execFileSync } from "node:child_process";
import { APIRequestContext, expect, Page, test } from "@playwright/test";

/** A value scripts/test.sh exports; without it the test is skipped (failed under CONVERGE_STRICT=1). */
export function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    const why = `${name} is not set: run the browser tests through scripts/test.sh, which creates the test users and merchants`;
    if (process.env.CONVERGE_STRICT === "1") throw new Error(why);
    test.skip(true, why);
  }
  return value as string;
}

export type Role = "admin" | "operator" | "viewer" | "approver" | "auditor";

/** Login name and password of the test user with `role`. */
export function account(role: Role): { username: string; password: string } {
  const upper = role.toUpperCase();
  return { username: env(`E2E_${upper}_USER`), password: env(`E2E_${upper}_PASSWORD`) };
}

/** Signs in through the login page and waits for the dashboard's top bar. */
export async function signIn(page: Page, role: Role): Promise<void> {
  const { username, password } = account(role);
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  await hydrated(page);
}

/** Opens a console page and waits until it is hydrated (its buttons have their handlers). */
export async function open(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await hydrated(page);
}

/** Waits for the console frame's hydration marker. */
export async function hydrated(page: Page): Promise<void> {
  await expect(page.locator("header.topbar")).toHaveAttribute("data-hydrated", "true");
}

/** A name unlikely to repeat across runs against the same database. */
export function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Creates a payment through the merchant API and returns its JSON (asserting 201 or 200). */
export async function createPayment(
  request: APIRequestContext,
  key: string,
  body: { amount: number; currency: string; merchant_order_id: string; capture?: "automatic" | "manual" },
  idempotencyKey: string,
): Promise<{ id: string; status: string }> {
  const response = await request.post("/v1/payments", {
    headers: { Authorization: `Bearer ${key}`, "Idempotency-Key": idempotencyKey },
    data: body,
  });
  expect(response.status(), await response.text()).toBeLessThan(300);
  return response.json();
}

/** The integer shown by the element with `testId`. */
export async function numberOf(page: Page, testId: string): Promise<number> {
  const text = (await page.getByTestId(testId).first().textContent()) ?? "";
  const n = Number.parseInt(text.replace(/[^0-9-]/g, ""), 10);
  return Number.isNaN(n) ? 0 : n;
}

/** Collects uncaught errors of the page (a panic in the WebAssembly shows up here). */
export function pageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  return errors;
}

/** Every axe-core finding of one scan, as written to test-results/axe/<name>.json. */
export type AxeFinding = { id: string; impact: string; help: string; nodes: { target: string; summary: string }[] };

/**
 * Scans the page as it is now with axe-core (every rule axe runs by default, WCAG 2.x A/AA
 * and best practices), writes all findings to test-results/axe/<name>.json and fails on any
 * of impact serious or critical. Nothing is excluded and no rule is disabled.
 */
export async function axeScan(page: Page, name: string): Promise<AxeFinding[]> {
  const results = await new AxeBuilder({ page }).analyze();
  const findings: AxeFinding[] = results.violations.map((v) => ({
    id: v.id,
    impact: v.impact ?? "unknown",
    help: v.help,
    nodes: v.nodes.map((n) => ({ target: n.target.join(" "), summary: n.failureSummary ?? "" })),
  }));
  const dir = path.join(__dirname, "..", "test-results", "axe");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${name}.json`), JSON.stringify({ url: page.url(), findings }, null, 2));
  const serious = findings.filter((f) => f.impact === "serious" || f.impact === "critical");
  expect(serious, `axe found serious or critical violations on ${name} (${page.url()})`).toEqual([]);
  return findings;
}

/**
 * Presses Tab (or Shift+Tab) until the focused element satisfies `test` (evaluated in the
 * page on document.activeElement), at most `max` times; fails if it never does. Keyboard
 * only: the page is read, never clicked.
 */
export async function tabTo(
  page: Page,
  what: string,
  test: (el: Element) => boolean,
  { max = 120, back = false }: { max?: number; back?: boolean } = {},
): Promise<void> {
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((src) => {
      const el = document.activeElement;
      return !!el && el !== document.body && (0, eval)(`(${src})`)(el);
    }, test.toString())) return;
    await page.keyboard.press(back ? "Shift+Tab" : "Tab");
  }
  throw new Error(`Tab never reached ${what}`);
}

/** Runs the `converge` CLI on the test server's database (as an operator at a shell would). */
export function cli(...args: string[]): string {
  return execFileSync(env("E2E_CONVERGE_BIN"), args, {
    env: { ...process.env, DATABASE_URL: env("E2E_DATABASE_URL") },
    encoding: "utf8",
  });
}

/**
 * A payment that was in flight when its merchant was frozen, so it waits in SUSPENSE with an
 * open error-pool item: a merchant of its own (made with the CLI), a charge whose answer
 * breaks off (amount digits 54: the channel charged, the payment is UNKNOWN), the merchant
 * frozen before the core's query finds the charge, whose ledger posting then fails. A frozen
 * merchant's API refuses new payments (403 merchant_frozen), hence the order.
 */
export async function suspendedPayment(
  request: APIRequestContext,
  body: { amount: number; currency: string; merchant_order_id: string },
): Promise<{ id: string; status: string }> {
  expect(body.amount % 100, "amount digits 54: charged, answer broken off").toBe(54);
  const merchant = unique("frozen");
  const key = cli("merchant", "add", merchant).trim();
  const payment = await createPayment(request, key, body, unique("idem"));
  expect(payment.status).toBe("UNKNOWN");
  cli("merchant", "freeze", merchant);
  await expect
    .poll(
      async () => {
        const r = await request.get(`/v1/payments/${payment.id}`, { headers: { Authorization: `Bearer ${key}` } });
        return (await r.json()).status;
      },
      { timeout: 20_000, intervals: [250] },
    )
    .toBe("SUSPENSE");
  return { ...payment, status: "SUSPENSE" };
}

/** Signs `page` in as the user named by the environment variables `<prefix>_USER` and `<prefix>_PASSWORD`. */
export async function signInAs(page: Page, prefix: string): Promise<void> {
  const username = env(`${prefix}_USER`);
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(env(`${prefix}_PASSWORD`));
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  await hydrated(page);
}

/**
 * Approves, as the admin signed in on `page` (whose password is `password`), the pending
 * privilege request (issue 36) whose change mentions `text`, on the Approvals page.
 */
export async function approvePrivilege(page: Page, text: string, password: string): Promise<void> {
  await open(page, "/approvals");
  const row = page.getByTestId("privilege-pending").getByRole("row").filter({ hasText: text });
  await expect(row).toHaveCount(1);
  await row.getByTestId("privilege-approve").click();
  await row.getByTestId("privilege-password").fill(password);
  await row.getByTestId("privilege-reason").fill("second admin: checked with the requester");
  await row.getByTestId("privilege-submit").click();
  await expect(page.getByTestId("flash")).toContainText("is now executed");
}

/** Opens the Main navigation's `link` and waits for the page's `heading` (h1). */
export async function go(page: Page, link: RegExp | string, heading: string): Promise<void> {
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: link }).click();
  await expect(page.getByRole("heading", { name: heading, level: 1 })).toBeVisible();
}

/**
 * Ends (or cancels) every open pause of `target` through the ops API, as the server requires
 * of an early end (issue 36): the operator asks with its password, the approver approves with
 * its. A spec's cleanup, in `finally`: the shared server is left as it was found.
 */
export async function resumePauses(
  target: string,
  operator: { page: Page; password: string },
  approver: { page: Page; password: string },
  reason: string,
): Promise<void> {
  const origin = new URL(process.env.CONVERGE_E2E_URL ?? "http://127.0.0.1:3000").origin;
  const list = await operator.page.request.get("/ops/v1/pauses");
  if (!list.ok()) return;
  for (const p of (await list.json()).items) {
    if (p.target === target && (p.status === "pending" || p.status === "active")) {
      await operator.page.request.post(`/ops/v1/pauses/${p.id}/resume`, {
        headers: { Origin: origin },
        data: { password: operator.password, reason },
      });
      await approver.page.request.post(`/ops/v1/pauses/${p.id}/approve`, {
        headers: { Origin: origin },
        data: { password: approver.password, reason },
      });
    }
  }
}
