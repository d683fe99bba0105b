// Accessibility (issue 16): every console page is scanned with axe-core in Chromium after it
// has data on it (payments of each kind, an error-pool item, a pending and a decided action,
// a webhook endpoint with deliveries, users), and with its forms open. No violation of impact
// serious or critical is allowed; nothing is excluded and no rule is switched off. Every
// finding, whatever its impact, is written to test-results/axe/<page>.json.
//
// One user with every role (E2E_A11Y_USER, made by scripts/test.sh) signs in once, so every
// control is on the page and the login limit is not spent.
import * as http from "node:http";
import { AddressInfo } from "node:net";
import { BrowserContext, expect, Page, test } from "@playwright/test";
import { axeScan, createPayment, env, hydrated, open, pageErrors, suspendedPayment, unique } from "./support";

test.describe.configure({ mode: "serial" });

let context: BrowserContext;
let page: Page;
let errors: string[];
let receiver: http.Server;
const data = { success: "", suspense: "", order: "", endpoint: "" };

test.beforeAll(async ({ browser }) => {
  context = await browser.newContext();
  page = await context.newPage();
  errors = pageErrors(page);
  // A webhook receiver on loopback that answers 204 (scripts/test.sh allows private URLs).
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
});

test.afterAll(async () => {
  // The endpoint is the shop's: deleted, so the later tests' payments are not delivered to it.
  if (data.endpoint) {
    const gone = await page.request.delete(`/v1/webhook_endpoints/${data.endpoint}`, {
      headers: { Authorization: `Bearer ${env("E2E_MERCHANT_KEY")}` },
    });
    expect(gone.status(), await gone.text()).toBe(200);
  }
  receiver?.close();
  await context?.close();
});

test("sign-in page", async () => {
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await expect(page.getByTestId("sign-in")).toBeVisible();
  await axeScan(page, "sign-in");
});

test("dashboard, with payments of every kind", async ({ request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const { port } = receiver.address() as AddressInfo;
  const hook = await request.post("/v1/webhook_endpoints", {
    headers: { Authorization: `Bearer ${shop}`, "Idempotency-Key": unique("a11y-we") },
    data: { url: `http://127.0.0.1:${port}/a11y`, enabled_events: ["*"], description: "a11y receiver" },
  });
  expect(hook.status(), await hook.text()).toBe(201);
  data.endpoint = (await hook.json()).id;
  data.order = unique("a11y");
  data.success = (await createPayment(request, shop, { amount: 2500, currency: "CNY", merchant_order_id: data.order }, unique("idem"))).id;
  await createPayment(request, shop, { amount: 1051, currency: "CNY", merchant_order_id: unique("a11y-declined") }, unique("idem"));
  await createPayment(request, shop, { amount: 1052, currency: "USD", merchant_order_id: unique("a11y-slow") }, unique("idem"));
  data.suspense = (await suspendedPayment(request, { amount: 954, currency: "CNY", merchant_order_id: unique("a11y-frozen") })).id;

  await page.getByLabel("Username").fill(env("E2E_A11Y_USER"));
  await page.getByLabel("Password").fill(env("E2E_A11Y_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(env("E2E_A11Y_USER"));
  await hydrated(page);
  await expect(page.getByRole("heading", { name: "Dashboard" })).toBeVisible();
  await expect(page.getByTestId("hit-chart")).toBeVisible();
  await expect(page.getByTestId("stuck-oldest").getByRole("link", { name: data.suspense })).toBeVisible({ timeout: 25_000 });
  await axeScan(page, "dashboard");
});

test("payments list, with results", async () => {
  await open(page, "/payments");
  await expect(page.getByTestId("payments-table").getByRole("row").nth(4)).toBeVisible();
  await axeScan(page, "payments");
});

test("payment story, with its actions, events and the request form open", async () => {
  // An executed action (query) and a pending one (reverse), through the ops API with the
  // page's session, as the console itself sends them.
  const origin = new URL(page.url()).origin;
  for (const kind of ["query", "reverse"]) {
    const r = await page.request.post("/ops/v1/actions", {
      headers: { Origin: origin },
      data: { kind, payment_id: data.success, reason: `a11y scan: ${kind}` },
    });
    expect(r.status(), await r.text()).toBe(201);
  }
  await open(page, `/payments/${data.success}`);
  await expect(page.getByTestId("payment-status")).toHaveText("SUCCESS");
  await expect(page.getByTestId("actions")).toContainText("pending");
  await expect(page.getByTestId("payment-events")).toContainText("payment.succeeded");
  await axeScan(page, "payment-story");
  // Reverse is not offered while a reverse waits for its approver (issue 41), so the request
  // form is scanned on a payment with none pending.
  await expect(page.getByTestId("action-reverse")).toHaveCount(0);
  await open(page, `/payments/${data.suspense}`);
  await page.getByTestId("action-reverse").click();
  await expect(page.getByTestId("action-form")).toBeVisible();
  await axeScan(page, "payment-story-request-form");
});

test("payment story of a SUSPENSE payment, with jobs and error-pool items", async () => {
  await open(page, `/payments/${data.suspense}`);
  await expect(page.getByTestId("payment-status")).toHaveText("SUSPENSE");
  await expect(page.getByTestId("related-errors")).toContainText("suspense");
  await axeScan(page, "payment-story-suspense");
});

test("error pool, with items, a resolve form and a bulk-retry preview", async () => {
  await open(page, "/error-pool?status=open&kind=suspense");
  const row = page.getByRole("row").filter({ hasText: data.suspense });
  await expect(row).toHaveCount(1);
  await axeScan(page, "error-pool");
  await row.getByRole("button", { name: /Resolve/ }).click();
  await expect(page.getByTestId("resolve-note")).toBeVisible();
  await page.getByTestId("bulk-error_pool-preview").click();
  await expect(page.getByTestId("bulk-preview")).toBeVisible();
  await row.getByRole("checkbox").check();
  await page.getByTestId("bulk-resolve-preview").click();
  await expect(page.getByTestId("resolve-preview")).toBeVisible();
  await row.getByTestId(/^evidence-json-/).locator("summary").click();
  await axeScan(page, "error-pool-forms");
});

test("approvals, with a pending and a decided request", async ({ request }) => {
  // A decided request: queries run at once and are not in the inbox, so a reversal request
  // on another payment, withdrawn by its requester.
  const origin = new URL(page.url()).origin;
  const other = (await createPayment(request, env("E2E_MERCHANT_KEY"), { amount: 2501, currency: "CNY", merchant_order_id: unique("a11y-withdrawn") }, unique("idem"))).id;
  await expect
    .poll(async () => (await (await page.request.get(`/ops/v1/payments/${other}`)).json()).payment?.status, { timeout: 20_000 })
    .toBe("SUCCESS");
  const asked = await page.request.post("/ops/v1/actions", {
    headers: { Origin: origin },
    data: { kind: "reverse", payment_id: other, reason: "a11y scan: withdrawn" },
  });
  expect(asked.status(), await asked.text()).toBe(201);
  const withdrawn = await page.request.post(`/ops/v1/actions/${(await asked.json()).action.id}/cancel`, {
    headers: { Origin: origin },
    data: {},
  });
  expect(withdrawn.status(), await withdrawn.text()).toBe(200);
  await open(page, "/approvals");
  await expect(page.getByTestId("pending").getByRole("row").filter({ hasText: data.success })).toHaveCount(1);
  await expect(page.getByTestId("decided")).toContainText(other);
  await axeScan(page, "approvals");
});

test("pauses, with the request form for an endpoint", async () => {
  await open(page, "/pauses");
  await expect(page.getByTestId("pause-form")).toBeVisible();
  await page.getByTestId("pause-target").selectOption("endpoint");
  await expect(page.getByTestId("pause-endpoint")).toBeVisible();
  await axeScan(page, "pauses");
});

test("audit, with a verified chain", async () => {
  await open(page, "/audit");
  await page.getByTestId("verify").click();
  await expect(page.getByTestId("verify-result")).toContainText("records verified");
  await axeScan(page, "audit");
});

test("audit viewer, filtered by a payment", async () => {
  await open(page, `/audit?payment=${data.success}`);
  await expect(page.getByTestId("chain-status")).toContainText("records verified");
  await expect(page.getByTestId("audit-records")).toContainText("action_requested");
  await axeScan(page, "audit-payment");
});

test("users, with the list and the add form", async () => {
  await open(page, "/admin/users");
  await expect(page.getByTestId(`user-${env("E2E_A11Y_USER")}`)).toBeVisible();
  await axeScan(page, "users");
});

test("merchants, with their keys", async () => {
  await open(page, "/admin/merchants");
  await expect(page.getByTestId("merchant-e2e-shop")).toBeVisible();
  await axeScan(page, "merchants");
});

test("a merchant's page, with every panel (all roles)", async () => {
  await open(page, "/merchants/e2e-shop");
  await expect(page.getByTestId("merchant-name")).toHaveText("e2e-shop");
  await expect(page.getByTestId("merchant-payments").getByRole("row").nth(1)).toBeVisible();
  await expect(page.getByTestId("merchant-keys").getByRole("row").nth(1)).toBeVisible();
  await expect(page.getByTestId("merchant-history")).toBeVisible();
  await axeScan(page, "merchant");
});

test("search results, and an Idempotency-Key page with its stored response and outcomes", async ({ request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const key = unique("a11y-key");
  const body = { amount: 2500, currency: "CNY", merchant_order_id: unique("a11y-k") };
  await createPayment(request, shop, body, key);
  await createPayment(request, shop, body, key);
  await open(page, "/search?q=a11y");
  await expect(page.getByTestId("search-hit").nth(1)).toBeVisible();
  await axeScan(page, "search");
  // The box says when nothing matches.
  await page.getByTestId("find-input").fill("a11y-nothing-matches-this");
  await page.getByTestId("find-input").press("Enter");
  await expect(page.getByTestId("find-message")).toContainText("Nothing matches");
  await axeScan(page, "search-nothing");
  await page.getByTestId("find-input").fill(key.toUpperCase());
  await page.getByTestId("find-input").press("Enter");
  await expect(page.getByTestId("key-id")).toHaveText(key);
  await expect(page.getByTestId("key-outcome-replay")).toBeVisible();
  await axeScan(page, "idempotency-key");
});

test("webhooks, with an endpoint, deliveries and a delivery's attempts", async () => {
  await open(page, "/webhooks");
  await expect(page.getByTestId("endpoint-row").first()).toBeVisible();
  const rows = page.getByTestId("delivery-row");
  await expect(rows.first()).toBeVisible({ timeout: 15_000 });
  await axeScan(page, "webhooks");
  await rows.first().getByRole("button", { name: "Attempts" }).click();
  await expect(page.getByTestId("delivery-detail")).toBeVisible();
  await axeScan(page, "webhooks-delivery");
  expect(errors).toEqual([]);
});
