// Live pages (issue 17): the console learns of changes made anywhere through server-sent
// events and updates the open page without a reload. An approver's inbox shows an operator's
// request as it is made; the operator's open payment page shows the approver's decision and
// the reversal it ran; the dashboard counts a payment made through the merchant API; with the
// stream blocked the console says it is polling and still keeps up. "Without a reload" is
// checked with a marker put on `window`, which any reload or full navigation would lose.
// The operator and the approver are users of their own (scripts/test.sh), because of the
// login limit.
import { expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, numberOf, open, pageErrors, unique } from "./support";

test.describe.configure({ mode: "serial" });

async function signInAs(page: Page, username: string, password: string): Promise<void> {
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  await hydrated(page);
}

/** Marks the page's window; `stillSamePage` is true only if no reload or full navigation came since. */
async function markWindow(page: Page): Promise<void> {
  await page.evaluate(() => {
    (window as unknown as { __liveMarker: string }).__liveMarker = "still the same page";
  });
}

async function stillSamePage(page: Page): Promise<boolean> {
  return page.evaluate(() => (window as unknown as { __liveMarker?: string }).__liveMarker === "still the same page");
}

test("a request and its approval land live on the approver's inbox and the operator's payment page", async ({
  page,
  request,
  browser,
}) => {
  const shop = env("E2E_MERCHANT_KEY");
  const operator = { user: env("E2E_LIVE_OPERATOR_USER"), password: env("E2E_LIVE_OPERATOR_PASSWORD") };
  const approverAccount = { user: env("E2E_LIVE_APPROVER_USER"), password: env("E2E_LIVE_APPROVER_PASSWORD") };
  const errors = pageErrors(page);
  const payment = await createPayment(
    request,
    shop,
    { amount: 4250, currency: "CNY", merchant_order_id: unique("live") },
    unique("idem"),
  );

  // The operator opens the payment while the sandbox is still settling it: the page follows
  // the payment to SUCCESS by itself.
  await signInAs(page, operator.user, operator.password);
  await open(page, `/payments/${payment.id}`);
  await markWindow(page);
  await expect(page.getByTestId("live-state")).toHaveAttribute("data-mode", "live");
  await expect(page.getByTestId("payment-status")).toHaveText("SUCCESS", { timeout: 25_000 });

  // The approver has the inbox open, in its own browser context on a phone-sized window (an
  // approver on call), before anything is asked.
  const approverContext = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const approver = await approverContext.newPage();
  const approverErrors = pageErrors(approver);
  await signInAs(approver, approverAccount.user, approverAccount.password);
  await approver.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Approvals" }).click();
  await expect(approver).toHaveURL(/\/approvals$/);
  await hydrated(approver);
  await expect(approver.getByTestId("live-state")).toHaveAttribute("data-mode", "live");
  await markWindow(approver);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: payment.id });
  await expect(row).toHaveCount(0);

  // The operator requests a reversal.
  const reason = `customer refund agreed by phone (${unique("ticket")})`;
  await page.getByTestId("action-reverse").click();
  await page.getByTestId("action-reason").fill(reason);
  await page.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-flash")).toContainText("waiting for an approver");

  // It appears in the approver's open inbox, and in the navigation's count, without a reload.
  await expect(row).toHaveCount(1, { timeout: 5_000 });
  await expect(row).toContainText(reason);
  await expect(approver.getByTestId("approvals-count")).toBeVisible();
  expect(await stillSamePage(approver)).toBe(true);

  // The approver approves; the operator's open page shows the decision and the reversal.
  await row.getByTestId("approve").click();
  const form = approver.getByTestId("decision-form");
  await form.getByLabel("Your password").fill(approverAccount.password);
  await form.getByLabel("Reason").fill("checked the ticket");
  await form.getByTestId("decision-submit").click();
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  const decided = Date.now();

  await expect(page.getByTestId("payment-status")).toHaveText("REVERSED", { timeout: 5_000 });
  const tookMs = Date.now() - decided;
  await expect(page.getByTestId("actions")).toContainText("executed");
  await expect(page.getByTestId("actions")).toContainText(approverAccount.user);
  await expect(page.getByTestId("reversed-amount")).toContainText("42.50");
  expect(await stillSamePage(page)).toBe(true);
  expect(tookMs, "the decision reached the operator's page within a few seconds").toBeLessThan(5_000);

  expect(approverErrors).toEqual([]);
  await approverContext.close();
  expect(errors).toEqual([]);
});

test("the dashboard counts a payment made through the merchant API without a reload", async ({ page, request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const operator = { user: env("E2E_LIVE_OPERATOR_USER"), password: env("E2E_LIVE_OPERATOR_PASSWORD") };
  const errors = pageErrors(page);
  await signInAs(page, operator.user, operator.password);
  await expect(page.getByTestId("live-state")).toHaveAttribute("data-mode", "live");
  await markWindow(page);
  const before = await numberOf(page, "keyed-5m");
  await createPayment(request, shop, { amount: 1200, currency: "CNY", merchant_order_id: unique("live-dash") }, unique("idem"));
  await expect.poll(() => numberOf(page, "keyed-5m"), { timeout: 5_000, intervals: [200] }).toBeGreaterThan(before);
  expect(await stillSamePage(page)).toBe(true);
  expect(errors).toEqual([]);
});

test("with the stream blocked the console says it polls, and the dashboard still keeps up", async ({ page, request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const operator = { user: env("E2E_LIVE_OPERATOR_USER"), password: env("E2E_LIVE_OPERATOR_PASSWORD") };
  await page.route("**/ops/v1/live", (route) => route.abort());
  await signInAs(page, operator.user, operator.password);
  await expect(page.getByTestId("live-state")).toHaveAttribute("data-mode", "polling");
  await expect(page.getByTestId("live-state")).toContainText("polling");
  await markWindow(page);
  const before = await numberOf(page, "keyed-5m");
  await createPayment(request, shop, { amount: 1300, currency: "CNY", merchant_order_id: unique("live-poll") }, unique("idem"));
  // The fallback polls every 5 s.
  await expect.poll(() => numberOf(page, "keyed-5m"), { timeout: 12_000, intervals: [500] }).toBeGreaterThan(before);
  expect(await stillSamePage(page)).toBe(true);

  // The stream comes back: the console is live again without a reload.
  await page.unroute("**/ops/v1/live");
  await expect(page.getByTestId("live-state")).toHaveAttribute("data-mode", "live", { timeout: 15_000 });
  expect(await stillSamePage(page)).toBe(true);
});
