// Each form owns its fields: an action never takes its reason from another open form. Once a
// Retry pressed while the Reverse form was open was recorded and audited with the reason
// typed into the Reverse form.
import { expect, test } from "@playwright/test";
import { account, createPayment, env, hydrated, open, pageErrors, signIn, suspendedPayment, unique } from "./support";

test("a retry beside an open reversal form is recorded with its own reason", async ({ page, request }) => {
  const errors = pageErrors(page);
  const payment = await suspendedPayment(request, {
    amount: 1154,
    currency: "CNY",
    merchant_order_id: unique("forms"),
  });
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(env("E2E_NAV_USER"));
  await page.getByLabel("Password").fill(env("E2E_NAV_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await hydrated(page);
  await page.goto(`/payments/${payment.id}`);
  await hydrated(page);
  await expect(page.getByTestId("payment-status")).toHaveText("SUSPENSE");

  const typed = `refund agreed with the customer (${unique("ticket")})`;
  await page.getByTestId("action-reverse").click();
  await page.getByTestId("action-reason").fill(typed);
  await page.getByTestId("action-retry").click();
  await expect(page.getByTestId("action-flash")).toContainText("retry executed");
  const actions = page.getByTestId("actions");
  const retry = actions.getByRole("row").filter({ hasText: "retry" });
  await expect(retry).toContainText("retry now, from the console");
  await expect(actions).not.toContainText(typed);

  // Another form starts empty: what was typed for the reversal is not the forced transition's.
  await page.getByTestId("action-reverse").click();
  await page.getByTestId("action-reason").fill(typed);
  await page.getByTestId("action-force").click();
  await expect(page.getByTestId("action-reason")).toHaveValue("");
  expect(errors).toEqual([]);
});

test("a request whose payment moved shows as stale at once, without Approve", async ({ page, request, browser }) => {
  const errors = pageErrors(page);
  const key = env("E2E_MERCHANT_KEY");
  const payment = await createPayment(
    request,
    key,
    { amount: 1300, currency: "CNY", merchant_order_id: unique("stale") },
    unique("idem"),
  );
  await expect
    .poll(async () => (await (await request.get(`/v1/payments/${payment.id}`, { headers: { Authorization: `Bearer ${key}` } })).json()).status, {
      timeout: 20_000,
    })
    .toBe("SUCCESS");
  // An operator requests the reversal...
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(env("E2E_NAV_USER"));
  await page.getByLabel("Password").fill(env("E2E_NAV_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await hydrated(page);
  await page.goto(`/payments/${payment.id}`);
  await hydrated(page);
  await page.getByTestId("action-reverse").click();
  await page.getByTestId("action-reason").fill("customer asked for the money back");
  await page.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-flash")).toContainText("waiting for an approver");
  // ...then the merchant refunds part of it: the request's pinned version is gone.
  const refund = await request.post(`/v1/payments/${payment.id}/refunds`, {
    headers: { Authorization: `Bearer ${key}`, "Idempotency-Key": unique("idem") },
    data: { amount: 100 },
  });
  expect(refund.status(), await refund.text()).toBe(201);

  const approverContext = await browser.newContext();
  const approver = await approverContext.newPage();
  await signIn(approver, "approver");
  await open(approver, "/approvals");
  // The navigation counts what waits for an approver.
  await expect(approver.getByTestId("approvals-count")).toHaveText(/^[1-9]\d* waiting$/);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: payment.id });
  await expect(row.getByTestId("stale")).toContainText("the payment moved since the request");
  await expect(row.getByTestId("approve")).toBeHidden();
  await expect(row.getByTestId("reject")).toBeVisible();
  await approverContext.close();
  expect(errors).toEqual([]);
});

test("a session that ends mid-form says so, keeps the text, and signs in again in place", async ({ page, request }) => {
  const errors = pageErrors(page);
  const payment = await createPayment(
    request,
    env("E2E_MERCHANT_KEY"),
    { amount: 2600, currency: "CNY", merchant_order_id: unique("ended") },
    unique("idem"),
  );
  await signIn(page, "operator");
  await expect
    .poll(
      async () => {
        await open(page, `/payments/${payment.id}`);
        return (await page.getByTestId("payment-status").textContent()) ?? "";
      },
      { timeout: 25_000, intervals: [1_000] },
    )
    .toBe("SUCCESS");
  const typed = `customer disputed by phone (${unique("ticket")})`;
  await page.getByTestId("action-reverse").click();
  await page.getByTestId("action-reason").fill(typed);

  // The session ends elsewhere: signed out in another tab of the same browser.
  const other = await page.context().newPage();
  await open(other, "/");
  await other.getByTestId("sign-out").click();
  await expect(other).toHaveURL(/\/login/);
  await other.close();

  // Sending the form says the session ended, and nothing typed is lost.
  await page.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-error")).toContainText("Your session has ended");
  const box = page.getByTestId("session-ended");
  await expect(box).toBeVisible();
  await expect(box).toContainText(account("operator").username);
  await expect(page.getByTestId("action-reason")).toHaveValue(typed);

  // Signing in again on the spot keeps the page as it was; the form then goes through.
  await page.getByTestId("session-ended-password").fill(account("operator").password);
  await page.getByTestId("session-ended-sign-in").click();
  await expect(page.getByTestId("session-restored")).toBeVisible();
  await expect(box).toHaveCount(0);
  await expect(page.getByTestId("action-reason")).toHaveValue(typed);
  await page.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-flash")).toContainText("waiting for an approver");

  // Leave nothing pending for the other tests: the requester withdraws it.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: /^Approvals/ }).click();
  await hydrated(page);
  const row = page.getByTestId("pending").getByRole("row").filter({ hasText: payment.id });
  await row.getByTestId("cancel-request").click();
  await row.getByTestId("cancel-confirm").click();
  await expect(page.getByTestId("flash")).toContainText("cancelled");
  expect(errors).toEqual([]);
});
