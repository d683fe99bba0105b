// Keyboard only (issue 16): one maker-checker round trip without the mouse. After page.goto
// of the sign-in page, every step is keyboard.press or keyboard.type (Tab, Shift+Tab, Enter,
// Space): an operator finds a SUCCESS payment through the search form and requests its
// reversal; an approver, in its own browser context, opens the approval form, re-enters its
// password and approves. The page is only read (where the focus is, what it shows), never
// clicked or filled. The operator and the approver are users of their own (scripts/test.sh).
import { expect, Page, test } from "@playwright/test";
import { axeScan, createPayment, env, hydrated, pageErrors, tabTo, unique } from "./support";

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

/** Tabs to the main navigation's link named `name` and follows it with Enter. */
async function navigate(page: Page, name: string): Promise<void> {
  await tabTo(page, `the ${name} link`, new Function("el", `return !!el.closest('nav.mainnav') && el.textContent.trim() === ${JSON.stringify(name)}`) as (el: Element) => boolean);
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
