// The payments list as ops staff use it in an incident (issue 17): a CSV export of exactly
// what the filters select, and times in UTC or the browser's zone by a remembered switch.
import * as fs from "node:fs";
import { expect, test } from "@playwright/test";
import { cli, createPayment, env, hydrated, open, pageErrors, signIn, unique } from "./support";

test("the CSV export holds exactly what the filters select, formula-safe", async ({ page, request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const errors = pageErrors(page);
  const order = unique("=export");
  await createPayment(request, shop, { amount: 18857, currency: "CNY", merchant_order_id: order }, unique("idem"));
  await createPayment(request, shop, { amount: 100, currency: "CNY", merchant_order_id: unique("other") }, unique("idem"));

  await signIn(page, "viewer");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Payments" }).click();
  await hydrated(page);
  await page.getByLabel("Merchant order id").fill(order);
  await page.getByTestId("search").click();
  await expect(page).toHaveURL(/order=/);
  await expect(page.getByTestId("payments-table").getByRole("row")).toHaveCount(2);

  const [download] = await Promise.all([page.waitForEvent("download"), page.getByTestId("export-csv").click()]);
  expect(download.suggestedFilename()).toMatch(/^converge-payments-.*\.csv$/);
  const text = fs.readFileSync((await download.path()) as string, "utf8");
  const lines = text.trim().split("\n");
  expect(lines[0]).toBe(
    "id,merchant,merchant_order_id,status,amount_minor,amount,currency,refunded_minor,description,channel_key,submit_attempts,last_error,created_at_utc,updated_at_utc",
  );
  // One payment: the one the filter selects, its order id defused for spreadsheets, its
  // amount both exact (minor units) and as people read it.
  expect(lines).toHaveLength(2);
  expect(lines[1]).toContain(`,e2e-shop,'${order},`);
  expect(lines[1]).toContain(",18857,188.57,CNY,");
  expect(errors).toEqual([]);
});

test("times switch between UTC and the browser's zone, and the choice is remembered", async ({ browser }) => {
  const context = await browser.newContext({ timezoneId: "Asia/Shanghai" });
  const page = await context.newPage();
  const errors = pageErrors(page);
  await signIn(page, "viewer");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Payments" }).click();
  await hydrated(page);
  const firstTime = page.getByTestId("payments-table").locator("time").first();
  await expect(firstTime).toHaveText(/ UTC$/);
  const utc = (await firstTime.getAttribute("datetime")) as string;

  await page.getByTestId("times-local").click();
  await expect(page.getByTestId("times-local")).toHaveAttribute("aria-pressed", "true");
  await expect(firstTime).toHaveText(/ \+08:00$/);
  // The same instant, eight hours on.
  const shown = ((await firstTime.textContent()) as string).replace(" +08:00", "");
  const expected = new Date(Date.parse(utc) + 8 * 3600_000).toISOString().slice(0, 19).replace("T", " ");
  expect(shown).toBe(expected);

  // Remembered across a reload and on other pages.
  await page.reload();
  await hydrated(page);
  await expect(page.getByTestId("payments-table").locator("time").first()).toHaveText(/ \+08:00$/);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Dashboard" }).click();
  await hydrated(page);
  await expect(page.getByTestId("times-local")).toHaveAttribute("aria-pressed", "true");

  await page.getByTestId("times-utc").click();
  await expect(page.getByTestId("times-utc")).toHaveAttribute("aria-pressed", "true");
  expect(errors).toEqual([]);
  await context.close();
});

test("with local times on, the time filters read in the browser's zone and say so", async ({ browser, request }) => {
  const order = unique("zoned");
  await createPayment(request, env("E2E_MERCHANT_KEY"), { amount: 4200, currency: "CNY", merchant_order_id: order }, unique("idem"));
  const context = await browser.newContext({ timezoneId: "Asia/Shanghai" });
  const page = await context.newPage();
  const errors = pageErrors(page);
  await signIn(page, "viewer");
  await open(page, "/payments");
  await page.getByTestId("times-utc").click();
  await expect(page.getByTestId("from-label")).toHaveText("Created from (UTC)");
  await page.getByTestId("times-local").click();
  await expect(page.getByTestId("from-label")).toHaveText("Created from (UTC+08:00, local)");

  // Ten minutes ago on a Shanghai clock finds the payment just made; read as UTC it would be
  // nearly eight hours ahead and find nothing.
  const shanghai = (ms: number) => new Date(ms + 8 * 3600_000).toISOString().slice(0, 16);
  await page.getByLabel("Merchant order id").fill(order);
  await page.getByLabel("Created from (UTC+08:00, local)").fill(shanghai(Date.now() - 10 * 60_000));
  await page.getByTestId("search").click();
  await expect(page.getByTestId("payments-table").getByRole("row")).toHaveCount(2);
  expect(new URL(page.url()).searchParams.get("tz")).toBe("+08:00");
  await page.getByLabel("Created from (UTC+08:00, local)").fill(shanghai(Date.now() + 10 * 60_000));
  await page.getByTestId("search").click();
  await expect(page.getByTestId("result-count")).toHaveText("No payments match.");

  // Back to UTC: the label says so, and the filter is read as UTC again.
  await page.getByTestId("times-utc").click();
  await expect(page.getByTestId("from-label")).toHaveText("Created from (UTC)");
  const utcNow = new Date(Date.now() - 10 * 60_000).toISOString().slice(0, 16);
  await page.getByLabel("Created from (UTC)").fill(utcNow);
  await page.getByTestId("search").click();
  await expect(page.getByTestId("payments-table").getByRole("row")).toHaveCount(2);
  expect(new URL(page.url()).searchParams.get("tz")).toBeNull();
  expect(errors).toEqual([]);
  await context.close();
});

test("the list pages older and back newer to exactly the page it left (issue 41)", async ({ page, request }) => {
  const errors = pageErrors(page);
  // A merchant of its own: 53 payments, so the list has a second page of 3 whatever other
  // tests add meanwhile.
  const merchant = unique("pages");
  const key = cli("merchant", "add", merchant).trim();
  for (let batch = 0; batch < 53; batch += 10) {
    await Promise.all(
      Array.from({ length: Math.min(10, 53 - batch) }, (_, i) =>
        createPayment(request, key, { amount: 1000, currency: "CNY", merchant_order_id: unique(`pg${batch + i}`) }, unique("idem")),
      ),
    );
  }

  await signIn(page, "viewer");
  await open(page, `/payments?merchant=${merchant}`);
  const ids = () => page.getByTestId("payments-table").getByRole("link").allTextContents();
  await expect(page.getByTestId("result-count")).toHaveText("50 payments on this page");
  await expect(page.getByTestId("prev-page")).toHaveCount(0);
  const first = await ids();
  expect(first).toHaveLength(50);

  await page.getByTestId("next-page").click();
  await expect(page).toHaveURL(/[?&]after=/);
  await expect(page.getByTestId("result-count")).toHaveText("3 payments");
  await expect(page.getByTestId("next-page")).toHaveCount(0);
  const second = await ids();
  expect(second.filter((id) => first.includes(id))).toEqual([]);

  await page.getByTestId("prev-page").click();
  await expect(page).toHaveURL(/[?&]before=/);
  await expect(page.getByTestId("result-count")).toHaveText("50 payments on this page");
  expect(await ids()).toEqual(first);
  // The newest page again: nothing newer, older still there.
  await expect(page.getByTestId("prev-page")).toHaveCount(0);
  await expect(page.getByTestId("next-page")).toBeVisible();
  expect(errors).toEqual([]);
});

test("the list and its export filter by time in state, kept in the URL (issue 41)", async ({ page, request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const errors = pageErrors(page);
  const order = unique("in-state");
  const paid = await createPayment(request, shop, { amount: 18800, currency: "CNY", merchant_order_id: order }, unique("idem"));

  await signIn(page, "viewer");
  await open(page, "/payments");
  await page.getByLabel("Merchant order id").fill(order);
  await page.getByTestId("search").click();
  await expect(page.getByTestId("payments-table").getByRole("link", { name: paid.id })).toBeVisible();

  // Made a moment ago: not in its state for over 5 minutes.
  await page.getByLabel("In its state for over (minutes)").fill("5");
  await page.getByTestId("search").click();
  await expect(page).toHaveURL(/[?&]in_state_for=5(&|$)/);
  await expect(page.getByTestId("result-count")).toHaveText("No payments match.");
  await expect(page.getByTestId("export-csv")).toHaveAttribute("href", /[?&]in_state_for=5(&|$)/);
  // The URL is the search: a reload keeps the field and the result.
  await page.reload();
  await hydrated(page);
  await expect(page.getByLabel("In its state for over (minutes)")).toHaveValue("5");
  await expect(page.getByTestId("result-count")).toHaveText("No payments match.");
  // The export selects the same: the header only.
  const csv = await page.request.get((await page.getByTestId("export-csv").getAttribute("href")) as string);
  expect(csv.status()).toBe(200);
  expect((await csv.text()).trim().split("\n")).toHaveLength(1);

  // Cleared, the payment is back.
  await page.getByLabel("In its state for over (minutes)").fill("");
  await page.getByTestId("search").click();
  await expect(page).not.toHaveURL(/in_state_for/);
  await expect(page.getByTestId("payments-table").getByRole("link", { name: paid.id })).toBeVisible();
  expect(errors).toEqual([]);
});
