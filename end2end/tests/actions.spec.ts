// Ops actions under maker-checker in a real browser (issue 6): an operator requests a
// reverse of a SUCCESS payment, a second request is refused while it is pending, an approver
// in a second browser context approves it (re-entering the password), the payment shows
// REVERSED, and an auditor verifies the chain and exports the log as CSV.
import * as fs from "node:fs";
import { expect, test } from "@playwright/test";
import { account, createPayment, env, hydrated, open, pageErrors, signIn, unique } from "./support";

test.describe.configure({ mode: "serial" });

test("operator requests a reverse, approver approves, auditor exports", async ({ page, request, browser }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const errors = pageErrors(page);
  const payment = await createPayment(
    request,
    shop,
    { amount: 3100, currency: "CNY", merchant_order_id: unique("reverse") },
    unique("idem"),
  );

  // The operator waits for the payment to settle as SUCCESS (the sandbox answers quickly).
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

  // Request the reverse.
  const reason = `customer refund agreed by phone (${unique("ticket")})`;
  await page.getByTestId("action-reverse").click();
  // The form says what approving it refunds, in major units (issue 41).
  await expect(page.getByTestId("reversal-refunds")).toContainText("31.00 CNY");
  await page.getByTestId("action-reason").fill(reason);
  await page.getByTestId("action-submit").click();
  await expect(page.getByTestId("action-flash")).toContainText("waiting for an approver");
  await expect(page.getByTestId("pending-count")).toContainText("1 pending");
  const actions = page.getByTestId("actions");
  await expect(actions).toContainText("reverse");
  await expect(actions).toContainText("pending");
  await expect(actions).toContainText(account("operator").username);

  // While it waits, Reverse is not offered (issue 41: it was, and submitting gave 409); the
  // page says which request to decide first.
  await expect(page.getByTestId("action-reverse")).toHaveCount(0);
  const pendingId = (await (await page.request.get(`/ops/v1/payments/${payment.id}`)).json()).actions[0].id;
  await expect(page.getByTestId("unavailable-actions")).toContainText(
    `No reverse: request ${pendingId} is waiting for an approver`,
  );
  // The server still refuses a second request, whatever a page offers.
  const second = await page.request.post("/ops/v1/actions", {
    headers: { Origin: new URL(page.url()).origin },
    data: { kind: "reverse", payment_id: payment.id, reason: "a duplicate request" },
  });
  expect(second.status()).toBe(409);
  expect(await second.text()).toContain("already has a pending request");
  await expect(page.getByTestId("payment-status")).toHaveText("SUCCESS");

  // The approver, in its own browser context, approves after re-entering its password.
  const approverContext = await browser.newContext();
  const approver = await approverContext.newPage();
  const approverErrors = pageErrors(approver);
  await signIn(approver, "approver");
  await approver.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Approvals" }).click();
  await hydrated(approver);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: payment.id });
  await expect(row).toHaveCount(1);
  await expect(row).toContainText(reason);
  await expect(row.getByTestId("requester")).toHaveText(account("operator").username);
  // The inbox shows what is at stake without opening the payment: merchant, amount in major
  // units, and the payment's status now.
  await expect(row.getByTestId("merchant")).toHaveText("e2e-shop");
  await expect(row.getByTestId("amount")).toHaveText("31.00 CNY");
  await expect(row.getByTestId("reversal-refunds")).toHaveText("refunds 31.00 CNY");
  await expect(row).toContainText("SUCCESS");
  await expect(row.getByTestId("stale")).toHaveCount(0);
  // Queries and retries run at once: they never appear in the inbox.
  await expect(approver.getByTestId("pending")).not.toContainText("retry");
  await row.getByTestId("approve").click();
  const form = approver.getByTestId("decision-form");
  // A wrong password is refused and nothing executes.
  await form.getByLabel("Your password").fill("not-my-password-at-all");
  await form.getByLabel("Reason").fill("checked the ticket");
  await form.getByTestId("decision-submit").click();
  await expect(form.getByTestId("decision-error")).toContainText("re-enter your own password");
  await form.getByLabel("Your password").fill(account("approver").password);
  await form.getByTestId("decision-submit").click();
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  const decidedRow = approver.getByTestId("decided").getByRole("row").filter({ hasText: payment.id });
  await expect(decidedRow.getByTestId("decided-by")).toContainText(`${account("approver").username}: checked the ticket`);
  await expect(decidedRow.getByTestId("decided-by").locator("time")).toHaveText(/\d{4}-\d{2}-\d{2} \d{2}:\d{2}/);
  // The result names the refund in major units, never bare minor units.
  await expect(decidedRow).toContainText("31.00 CNY");
  await expect(decidedRow).not.toContainText("minor units");
  expect(approverErrors).toEqual([]);
  await approverContext.close();

  // The operator's page shows the payment REVERSED, the action executed, and its audit trail.
  await open(page, `/payments/${payment.id}`);
  await expect(page.getByTestId("payment-status")).toHaveText("REVERSED");
  await expect(actions).toContainText("executed");
  await expect(actions).toContainText(account("approver").username);
  const audit = page.getByTestId("payment-audit");
  await expect(audit).toContainText("action_requested");
  await expect(audit).toContainText("action_executed");
  // The reversal's refund is on the page (not "Refunded 0.00" and "No refunds"), and a
  // REVERSED payment is not offered another reversal.
  await expect(page.getByTestId("reversed-amount")).toContainText("31.00 CNY");
  await expect(page.getByTestId("reversal-refund")).toContainText("31.00 CNY refunded at the channel");
  await expect(page.getByTestId("action-reverse")).toHaveCount(0);
  await expect(page.getByTestId("unavailable-actions")).toContainText("No reverse: a REVERSED payment cannot be reversed");
  // Every amount a person reads is in major units with its currency (issue 41).
  await expect(page.getByTestId("timeline")).toContainText("reversed the remaining 31.00 CNY at the channel");
  await expect(page.locator("main")).not.toContainText("minor units");
  expect(errors).toEqual([]);

  // The auditor verifies the chain and downloads the CSV export.
  const auditorContext = await browser.newContext();
  const auditor = await auditorContext.newPage();
  const auditorErrors = pageErrors(auditor);
  await signIn(auditor, "auditor");
  await auditor.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" }).click();
  await hydrated(auditor);
  await auditor.getByTestId("verify").click();
  await expect(auditor.getByTestId("verify-result")).toContainText("records verified");
  await expect(auditor.getByTestId("verify-result")).toContainText("ok");

  const [download] = await Promise.all([
    auditor.waitForEvent("download"),
    auditor.getByTestId("export-csv").click(),
  ]);
  expect(download.suggestedFilename()).toMatch(/^converge-audit-\d+\.csv$/);
  const file = await download.path();
  const csv = fs.readFileSync(file as string, "utf8");
  expect(csv.split("\n")[0]).toMatch(/^seq,at,actor,roles,action,target,reason,before,after,request_meta,prev_hash,hash/);
  expect(csv).toContain("action_approved");
  expect(csv).toContain(`payment:${payment.id}`);

  // The same export filtered by action, fetched with the auditor's session. The action field
  // suggests the actions the log holds (issue 41), not free text to guess.
  await expect(auditor.getByTestId("audit-actions").locator('option[value="action_approved"]')).toHaveCount(1);
  await expect(auditor.getByTestId("filter-action")).toHaveAttribute("list", "audit-actions");
  await auditor.getByLabel("Action").fill("action_approved");
  const href = await auditor.getByTestId("export-csv").getAttribute("href");
  expect(href).toContain("action=action_approved");
  const filtered = await auditor.request.get(href as string);
  expect(filtered.status()).toBe(200);
  expect(filtered.headers()["converge-audit-head"]).toMatch(/^\d+ [0-9a-f]{64}$/);
  const rows = (await filtered.text()).trim().split("\n").slice(1);
  expect(rows.length).toBeGreaterThan(0);
  for (const r of rows) expect(r).toContain("action_approved");
  // The chain status names the signed checkpoints as `converge audit verify` does (issue 41);
  // every export signs one.
  await auditor.getByTestId("verify").click();
  const checkpoints = auditor.getByTestId("chain-checkpoints");
  await expect(checkpoints).toContainText("signed checkpoint(s); the latest covers records up to #");
  await expect(checkpoints).toContainText("signatures verified with the server's key");
  // The payment's records show their amounts in major units with the currency (issue 41).
  await open(auditor, `/audit?payment=${payment.id}`);
  await expect(auditor.getByTestId("audit-records")).toContainText("action_executed");
  await expect(auditor.getByTestId("audit-records")).toContainText("31.00 CNY");
  await expect(auditor.getByTestId("audit-records")).not.toContainText("minor units");
  expect(auditorErrors).toEqual([]);
  await auditorContext.close();
});

test("the audit page and its export are for auditors only", async ({ page }) => {
  await signIn(page, "operator");
  await expect(page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" })).toHaveCount(0);
  const refused = await page.request.get("/ops/v1/audit/export?format=csv");
  expect(refused.status()).toBe(403);
  const verify = await page.request.post("/api/verify_audit", { form: {} });
  expect(verify.ok()).toBe(false);
  expect(await verify.text()).toContain("your roles do not allow this");
  // The page itself says so in one sentence: no form, no refusal boxes (issue 41).
  await open(page, "/audit");
  await expect(page.getByTestId("audit-auditors-only")).toHaveText(/Only auditors may read, verify or export the audit log/);
  await expect(page.getByRole("alert").filter({ hasText: /\S/ })).toHaveCount(0);
  await expect(page.locator("form.filters")).toHaveCount(0);
  await expect(page.getByTestId("verify")).toHaveCount(0);
});
