// One incident played end to end (issue 17's proof), as the people in it would: a merchant
// says a charge went through twice-or-not-at-all and gives its Idempotency-Key; the operator
// finds the payment by that key from the search box, reads its story, and requests a
// reversal; the approver, on call with a phone (390 px wide), approves it; the operator's
// open payment page shows the reversal land without a reload; the auditor finds the four
// records of it in the audit viewer, with the chain verified. Users of its own
// (scripts/test.sh: E2E_INCIDENT_*), so the other specs' sign-ins do not count against it.
import { expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, pageErrors, unique } from "./support";

async function signInAs(page: Page, who: "OPERATOR" | "APPROVER" | "AUDITOR"): Promise<string> {
  const username = env(`E2E_INCIDENT_${who}_USER`);
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(env(`E2E_INCIDENT_${who}_PASSWORD`));
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  await hydrated(page);
  return username;
}

test("an incident: found by its key, reversed under maker-checker from a phone, seen live, audited", async ({
  browser,
  request,
}) => {
  const shop = env("E2E_MERCHANT_KEY");
  const key = unique("Incident-Key");
  const order = unique("incident-order");
  const payment = await createPayment(request, shop, { amount: 73125, currency: "CNY", merchant_order_id: order }, key);

  // The operator, at a desk, finds the payment by the key the merchant quoted.
  const desk = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const operator = await desk.newPage();
  const operatorErrors = pageErrors(operator);
  const operatorName = await signInAs(operator, "OPERATOR");
  await operator.locator("main h1").first().click();
  await operator.keyboard.press("/");
  await expect(operator.getByTestId("find-input")).toBeFocused();
  await operator.keyboard.type(key.toLowerCase());
  await operator.keyboard.press("Enter");
  await expect(operator.getByTestId("key-id")).toHaveText(key);
  await expect(operator.getByTestId("key-response-head")).toContainText("HTTP 201");
  await operator.getByTestId("key-payment").getByRole("link", { name: payment.id }).click();
  await expect(operator.getByTestId("payment-id")).toHaveText(payment.id);

  // Its story: charged once, settled; the amount in major units.
  await expect(operator.getByTestId("payment-status")).toHaveText("SUCCESS", { timeout: 20_000 });
  await expect(operator.getByText("731.25 CNY").first()).toBeVisible();
  await expect(operator.getByTestId("timeline")).toContainText("charged 731.25 CNY");

  // The reversal is requested with its reason.
  const reason = `merchant reports a duplicate order (${unique("ticket")})`;
  await operator.getByTestId("action-reverse").click();
  await operator.getByTestId("action-reason").fill(reason);
  await operator.getByTestId("action-submit").click();
  await expect(operator.getByTestId("action-flash")).toContainText("waiting for an approver");
  await expect(operator.getByTestId("live-state")).toHaveAttribute("data-mode", "live");
  // From here on the operator's page must not reload: a marker on `window` would be lost.
  await operator.evaluate(() => {
    (window as unknown as { __incident: boolean }).__incident = true;
  });

  // The approver, on a phone, approves from the inbox.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const approver = await phone.newPage();
  const approverErrors = pageErrors(approver);
  const approverName = await signInAs(approver, "APPROVER");
  await approver.getByRole("navigation", { name: "Main" }).getByRole("link", { name: /^Approvals/ }).click();
  await hydrated(approver);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: payment.id });
  await expect(row).toContainText(reason);
  await expect(row.getByTestId("amount")).toHaveText("731.25 CNY");
  await expect(row.getByTestId("merchant")).toHaveText("e2e-shop");
  await row.getByTestId("approve").click();
  const form = approver.getByTestId("decision-form");
  await form.getByLabel("Your password").fill(env("E2E_INCIDENT_APPROVER_PASSWORD"));
  await form.getByLabel("Reason").fill("duplicate confirmed with the merchant");
  await form.getByTestId("decision-submit").click();
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  // Nothing on the phone is wider than the phone.
  const overflow = await approver.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);

  // The operator's open page shows the reversal land, without a reload.
  await expect(operator.getByTestId("payment-status")).toHaveText("REVERSED", { timeout: 5_000 });
  await expect(operator.getByTestId("reversed-amount")).toContainText("731.25 CNY");
  await expect(operator.getByTestId("actions")).toContainText(approverName);
  expect(await operator.evaluate(() => (window as unknown as { __incident?: boolean }).__incident)).toBe(true);

  // The auditor sees the four records of the reversal, chain verified.
  const office = await browser.newContext();
  const auditor = await office.newPage();
  const auditorErrors = pageErrors(auditor);
  await signInAs(auditor, "AUDITOR");
  await auditor.goto(`/payments/${payment.id}`);
  await hydrated(auditor);
  await auditor.getByTestId("payment-audit-link").click();
  await expect(auditor).toHaveURL(new RegExp(`/audit\\?payment=${payment.id}$`));
  await expect(auditor.getByTestId("chain-status")).toContainText("ok");
  const records = auditor.getByTestId("audit-records");
  for (const [action, actor] of [
    ["action_requested", operatorName],
    ["action_approved", approverName],
    ["action_executed", approverName],
  ]) {
    await expect(records.getByRole("row").filter({ hasText: action }).filter({ hasText: actor })).toHaveCount(1);
  }
  await expect(records.getByRole("row").filter({ hasText: "action_requested" })).toContainText(reason);

  expect(operatorErrors).toEqual([]);
  expect(approverErrors).toEqual([]);
  expect(auditorErrors).toEqual([]);
  await Promise.all([desk.close(), phone.close(), office.close()]);
});
