// A manual-capture payment's hold in a real browser (issue 34, "Console"): an operator
// requests a partial capture with an amount in major units, an approver in a second browser
// context approves it (re-entering the password), then a final capture releases the rest;
// the payment page tells the hold's story with the authorized, captured and released amounts
// in major units, and never in minor units.
import { expect, test, type Browser } from "@playwright/test";
import { account, createPayment, env, hydrated, open, pageErrors, signIn, unique } from "./support";

test.describe.configure({ mode: "serial" });

/** Approves the pending request on `paymentId` as the approver, in its own browser context. */
async function approveAs(browser: Browser, paymentId: string, expectCapture: string) {
  const context = await browser.newContext();
  const approver = await context.newPage();
  const errors = pageErrors(approver);
  await signIn(approver, "approver");
  await approver.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Approvals" }).click();
  await hydrated(approver);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: paymentId });
  await expect(row).toHaveCount(1);
  await expect(row).toContainText("capture");
  // The card says what approving it captures, in major units.
  await expect(row.getByTestId("capture-amount")).toHaveText(`captures ${expectCapture}`);
  await row.getByTestId("approve").click();
  const form = approver.getByTestId("decision-form");
  await form.getByLabel("Your password").fill(account("approver").password);
  await form.getByLabel("Reason").fill("shipment confirmed");
  await form.getByTestId("decision-submit").click();
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  expect(errors).toEqual([]);
  await context.close();
}

/** Opens the capture form, fills it and requests it; the page says it waits for an approver. */
async function requestCapture(page: import("@playwright/test").Page, amount: string, last: boolean) {
  await page.getByTestId("action-capture").click();
  const form = page.getByTestId("action-form");
  await expect(form).toContainText("Request a capture");
  await form.getByTestId("action-amount").fill(amount);
  if (last) {
    await form.getByTestId("action-final").check();
  }
  await form.getByTestId("action-reason").fill(`goods shipped (${unique("parcel")})`);
  await form.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-flash")).toContainText("waiting for an approver");
  await expect(page.getByTestId("pending-count")).toContainText("1 pending");
}

test("operator requests a partial capture, approver approves, the page tells the hold", async ({ page, request, browser }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const errors = pageErrors(page);
  const payment = await createPayment(
    request,
    shop,
    { amount: 10000, currency: "CNY", merchant_order_id: unique("hold"), capture: "manual" },
    unique("idem"),
  );

  // The operator waits for the hold (the sandbox authorizes quickly).
  await signIn(page, "operator");
  await expect
    .poll(
      async () => {
        await open(page, `/payments/${payment.id}`);
        return (await page.getByTestId("payment-status").textContent()) ?? "";
      },
      { timeout: 25_000, intervals: [1_000] },
    )
    .toBe("AUTHORIZED");

  // The hold's story before any capture: authorized, nothing captured, an expiry.
  const hold = page.getByTestId("hold");
  await expect(hold.getByRole("heading", { name: "Hold" })).toBeVisible();
  await expect(page.getByTestId("hold-authorized")).toHaveText("100.00 CNY");
  await expect(page.getByTestId("hold-captured")).toHaveText("0.00 CNY");
  await expect(page.getByTestId("hold-held")).toHaveText("100.00 CNY");
  await expect(page.getByTestId("hold-expires").locator("time")).toHaveText(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}/);
  await expect(page.getByTestId("hold-no-captures")).toHaveText("No captures.");
  // An AUTHORIZED hold offers Capture and Void; no Reverse.
  await expect(page.getByTestId("action-void")).toHaveCount(1);
  await expect(page.getByTestId("action-reverse")).toHaveCount(0);

  // A capture of more than is held is refused on the form, before anything is sent.
  await page.getByTestId("action-capture").click();
  await expect(page.getByTestId("capture-held")).toContainText("100.00 CNY");
  await page.getByTestId("action-amount").fill("100.01");
  await page.getByTestId("action-reason").fill("too much");
  await page.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-error")).toContainText("At most 100.00 CNY is held");
  await page.getByTestId("action-form").getByRole("button", { name: "Cancel" }).click();

  // The partial capture: requested by the operator, approved by the approver.
  await requestCapture(page, "40.00", false);
  await expect(page.getByTestId("actions")).toContainText("capture");
  await approveAs(browser, payment.id, "40.00 CNY, partial");

  await open(page, `/payments/${payment.id}`);
  await expect(page.getByTestId("payment-status")).toHaveText("AUTHORIZED");
  await expect(page.getByTestId("hold-captured")).toHaveText("40.00 CNY");
  await expect(page.getByTestId("hold-held")).toHaveText("60.00 CNY");
  await expect(page.getByTestId("hold-released")).toContainText("0.00 CNY");
  const captures = page.getByTestId("hold-captures");
  await expect(captures.getByRole("row")).toHaveCount(2); // header + one capture
  await expect(captures).toContainText("40.00 CNY");
  await expect(captures).toContainText("partial");
  await expect(captures).toContainText("captured");
  await expect(captures).toContainText("action:act_");
  // Captured in part: Void is no longer offered, and the page says why.
  await expect(page.getByTestId("action-void")).toHaveCount(0);
  await expect(page.getByTestId("unavailable-actions")).toContainText("No void: the hold was captured in part");

  // The final capture releases the rest.
  await requestCapture(page, "25", true);
  await approveAs(browser, payment.id, "25.00 CNY, final");
  await open(page, `/payments/${payment.id}`);
  await expect(page.getByTestId("payment-status")).toHaveText("SUCCESS");
  await expect(page.getByTestId("hold-captured")).toHaveText("65.00 CNY");
  await expect(page.getByTestId("hold-released")).toContainText("35.00 CNY (final capture)");
  await expect(page.getByTestId("hold-held")).toHaveText("0.00 CNY");
  await expect(page.getByTestId("hold-captures")).toContainText("final");
  await expect(page.getByTestId("action-capture")).toHaveCount(0);
  // The action's result and the timeline say the amounts in major units too.
  await expect(page.getByTestId("actions")).toContainText("65.00 CNY");
  await expect(page.getByTestId("timeline")).toContainText("captured 25.00 CNY; released 35.00 CNY");
  await expect(page.locator("main")).not.toContainText("minor units");
  expect(errors).toEqual([]);
});
