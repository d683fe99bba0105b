// Keyboard only (issue 16): one maker-checker round trip without the mouse. After page.goto
// of the sign-in page, every step is keyboard.press or keyboard.type (Tab, Shift+Tab, Enter,
// Space): an operator finds a SUCCESS payment through the search form and requests its
// reversal; an approver, in its own browser context, opens the approval form, re-enters its
// password and approves. The page is only read (where the focus is, what it shows), never
// clicked or filled. The operator and the approver are users of their own (scripts/test.sh).
// A second test does every other console action the same way: query, retry, resolve, bulk
// retry, reject, verify the audit chain and export it.
import { expect, Page, test } from "@playwright/test";
import { axeScan, createPayment, env, hydrated, pageErrors, suspendedPayment, tabTo, unique } from "./support";

/** Types the credentials into the sign-in page with the keyboard and submits with Enter. */
async function signInByKeyboard(page: Page, user: string, password: string): Promise<void> {
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await tabTo(page, "the username field", (el) => el.getAttribute("name") === "username");
  await page.keyboard.type(user);
  await page.keyboard.press("Tab");
  await expect(page.getByLabel("Password")).toBeFocused();
  await page.keyboard.type(password);
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("current-user")).toHaveText(user);
  await hydrated(page);
}

/** Tabs to the main navigation's link named `name` and follows it with Enter (a link may
 * carry a count after its name: "Approvals 2 waiting"). */
async function navigate(page: Page, name: string): Promise<void> {
  await tabTo(page, `the ${name} link`, new Function("el", `return !!el.closest('nav.mainnav') && /^${name}(\\s*\\d+ waiting)?$/.test(el.textContent.trim())`) as (el: Element) => boolean);
  await page.keyboard.press("Enter");
  await hydrated(page);
}

test("a reversal is requested and approved with the keyboard alone", async ({ page, request, browser }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const operator = { user: env("E2E_KBD_OPERATOR_USER"), password: env("E2E_KBD_OPERATOR_PASSWORD") };
  const approverAccount = { user: env("E2E_KBD_APPROVER_USER"), password: env("E2E_KBD_APPROVER_PASSWORD") };
  const order = unique("kbd");
  const payment = await createPayment(request, shop, { amount: 3300, currency: "CNY", merchant_order_id: order }, unique("idem"));
  await expect
    .poll(async () => {
      const r = await request.get(`/v1/payments/${payment.id}`, { headers: { Authorization: `Bearer ${shop}` } });
      return (await r.json()).status;
    }, { timeout: 20_000 })
    .toBe("SUCCESS");
  const errors = pageErrors(page);

  // --- the operator (maker) ---------------------------------------------------------------
  await signInByKeyboard(page, operator.user, operator.password);
  await navigate(page, "Payments");
  await expect(page.getByRole("heading", { name: "Payments" })).toBeVisible();
  await tabTo(page, "the merchant order id field", (el) => el.getAttribute("name") === "order");
  await page.keyboard.type(order);
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`order=${order}`));
  const table = page.getByTestId("payments-table");
  await expect(table.getByRole("row")).toHaveCount(2);
  await tabTo(page, "the payment's link", new Function("el", `return el.tagName === 'A' && el.textContent.trim() === ${JSON.stringify(payment.id)}`) as (el: Element) => boolean);
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/payments/${payment.id}$`));
  await expect(page.getByTestId("payment-status")).toHaveText("SUCCESS");

  // "Reverse…" opens the request form and the focus moves into it.
  await tabTo(page, "Reverse…", (el) => el.getAttribute("data-testid") === "action-reverse");
  await page.keyboard.press("Space");
  await expect(page.getByTestId("action-reason")).toBeFocused();
  // Cancel gives the focus back to the button that opened the form.
  await tabTo(page, "Cancel", (el) => el.tagName === "BUTTON" && el.textContent?.trim() === "Cancel");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("action-form")).toHaveCount(0);
  await expect(page.getByTestId("action-reverse")).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("action-reason")).toBeFocused();
  const reason = `customer asked by phone (${unique("kbd-ticket")})`;
  await page.keyboard.type(reason);
  await page.keyboard.press("Tab");
  await expect(page.getByTestId("action-submit")).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("action-flash")).toContainText("waiting for an approver");
  // The outcome takes the focus (the story is rendered anew, the button is gone).
  await expect(page.getByTestId("action-flash")).toBeFocused();
  await expect(page.getByTestId("pending-count")).toContainText("1 pending");

  // --- the approver (checker), in its own browser context ---------------------------------
  const approverContext = await browser.newContext();
  const approver = await approverContext.newPage();
  const approverErrors = pageErrors(approver);
  await signInByKeyboard(approver, approverAccount.user, approverAccount.password);
  await navigate(approver, "Approvals");
  // The followed link hands the focus to the page, not back to the top bar (issue 41): the
  // next Tab lands inside the page's main region.
  await expect(approver.locator("main#main")).toBeFocused();
  await approver.keyboard.press("Tab");
  expect(await approver.evaluate(() => !!document.activeElement?.closest("main#main"))).toBe(true);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: payment.id });
  await expect(row).toContainText(reason);
  await tabTo(
    approver,
    "the request's Approve… button",
    new Function("el", `return el.getAttribute('data-testid') === 'approve' && el.closest('tr').textContent.includes(${JSON.stringify(payment.id)})`) as (el: Element) => boolean,
  );
  await approver.keyboard.press("Enter");
  // The focus moves into the opened form: the password field comes first.
  const form = approver.getByTestId("decision-form");
  await expect(form.getByLabel("Your password")).toBeFocused();
  await axeScan(approver, "approvals-decision-form");
  await approver.keyboard.type(approverAccount.password);
  await approver.keyboard.press("Tab");
  await expect(form.getByLabel("Reason")).toBeFocused();
  await approver.keyboard.type("checked the ticket");
  await approver.keyboard.press("Tab");
  await expect(form.getByTestId("decision-submit")).toBeFocused();
  await approver.keyboard.press("Enter");
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  await expect(approver.getByTestId("flash")).toBeFocused();
  await expect(approver.getByTestId("decided")).toContainText(payment.id);
  expect(approverErrors).toEqual([]);
  await approverContext.close();

  // The operator refreshes the story with the keyboard: REVERSED, approved by the approver.
  await tabTo(page, "Refresh", (el) => el.tagName === "BUTTON" && el.textContent?.trim() === "Refresh", { back: true });
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("payment-status")).toHaveText("REVERSED");
  await expect(page.getByTestId("actions")).toContainText(approverAccount.user);
  expect(errors).toEqual([]);
});

test("query, retry, resolve, bulk retry, reject, verify and export with the keyboard alone", async ({ page, request, browser }) => {
  const shop = env("E2E_MERCHANT_KEY");
  // Data: two SUSPENSE payments (error-pool items) and a pending reversal requested by the
  // keyboard operator through the ops API (so another user, an approver, can reject it).
  const stuckOrder = unique("kbd-stuck");
  const stuck = await suspendedPayment(request, { amount: 4154, currency: "CNY", merchant_order_id: stuckOrder });
  const other = await suspendedPayment(request, { amount: 4254, currency: "CNY", merchant_order_id: unique("kbd-stuck") });
  const paid = await createPayment(request, shop, { amount: 4300, currency: "CNY", merchant_order_id: unique("kbd-paid") }, unique("idem"));
  expect(paid.status).toBe("SUCCESS");
  const base = new URL(process.env.CONVERGE_E2E_URL ?? "http://127.0.0.1:3000").origin;
  const makerContext = await browser.newContext();
  const maker = makerContext.request;
  const login = await maker.post("/ops/v1/login", {
    headers: { Origin: base },
    data: { username: env("E2E_KBD_OPERATOR_USER"), password: env("E2E_KBD_OPERATOR_PASSWORD") },
  });
  expect(login.status(), await login.text()).toBe(200);
  const asked = await maker.post("/ops/v1/actions", {
    headers: { Origin: base },
    data: { kind: "reverse", payment_id: paid.id, reason: "to be rejected by keyboard" },
  });
  expect(asked.status(), await asked.text()).toBe(201);
  await makerContext.close();
  const errors = pageErrors(page);

  // A user with every role (the accessibility scans' user).
  await signInByKeyboard(page, env("E2E_A11Y_USER"), env("E2E_A11Y_PASSWORD"));

  // Query and retry, on the stuck payment's page.
  await navigate(page, "Payments");
  await tabTo(page, "the merchant order id field", (el) => el.getAttribute("name") === "order");
  await page.keyboard.type(stuckOrder);
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("payments-table").getByRole("row")).toHaveCount(2);
  await tabTo(page, "the payment's link", new Function("el", `return el.tagName === 'A' && el.textContent.trim() === ${JSON.stringify(stuck.id)}`) as (el: Element) => boolean);
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("payment-status")).toHaveText("SUSPENSE");
  await tabTo(page, "Query channel", (el) => el.getAttribute("data-testid") === "action-query");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("action-flash")).toContainText("query executed");
  await expect(page.getByTestId("action-flash")).toBeFocused();
  await tabTo(page, "Retry jobs", (el) => el.getAttribute("data-testid") === "action-retry");
  await page.keyboard.press("Space");
  await expect(page.getByTestId("action-flash")).toContainText("retry executed");

  // Resolve one error-pool item, then bulk-retry the rest of the selection.
  await navigate(page, "Error pool");
  await expect(page.getByRole("row").filter({ hasText: stuck.id })).toHaveCount(1);
  await tabTo(
    page,
    "the item's Resolve… button",
    new Function("el", `return el.tagName === 'BUTTON' && el.textContent.trim() === 'Resolve…' && el.closest('tr').textContent.includes(${JSON.stringify(stuck.id)})`) as (el: Element) => boolean,
  );
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("resolve-note")).toBeFocused();
  await page.keyboard.type("merchant unfrozen; posting retried (keyboard)");
  await page.keyboard.press("Tab");
  await expect(page.getByTestId("resolve-submit")).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("flash")).toContainText("resolved");
  await expect(page.getByTestId("flash")).toBeFocused();
  await expect(page.getByRole("row").filter({ hasText: stuck.id })).toHaveCount(0);
  await tabTo(page, "Preview", (el) => el.getAttribute("data-testid") === "bulk-error_pool-preview", { back: true });
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("bulk-preview").getByRole("link", { name: other.id })).toBeVisible();
  await expect(page.getByTestId("bulk-reason")).toBeFocused();
  await page.keyboard.type("ledger back (keyboard)");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("bulk-result")).toContainText(/Retried [1-9]\d* payments?/);
  await expect(page.getByTestId("bulk-result")).toBeFocused();

  // Reject the operator's request.
  await navigate(page, "Approvals");
  await tabTo(
    page,
    "the request's Reject… button",
    new Function("el", `return el.getAttribute('data-testid') === 'reject' && el.closest('tr').textContent.includes(${JSON.stringify(paid.id)})`) as (el: Element) => boolean,
  );
  await page.keyboard.press("Enter");
  const form = page.getByTestId("decision-form");
  await expect(form.getByLabel("Reason")).toBeFocused();
  await page.keyboard.type("no ticket for this reversal");
  await page.keyboard.press("Tab");
  await expect(form.getByTestId("decision-submit")).toBeFocused();
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("flash")).toContainText("rejected");

  // Verify the audit chain and export it.
  await navigate(page, "Audit");
  await tabTo(page, "Verify chain", (el) => el.getAttribute("data-testid") === "verify");
  await page.keyboard.press("Enter");
  await expect(page.getByTestId("verify-result")).toContainText("records verified");
  await tabTo(page, "Download CSV", (el) => el.getAttribute("data-testid") === "export-csv");
  const [download] = await Promise.all([page.waitForEvent("download"), page.keyboard.press("Enter")]);
  expect(download.suggestedFilename()).toMatch(/^converge-audit-\d+\.csv$/);
  expect(errors).toEqual([]);
});
