// Each form owns its fields: an action never takes its reason from another open form. Once a
// Retry pressed while the Reverse form was open was recorded and audited with the reason
// typed into the Reverse form.
import { expect, test } from "@playwright/test";
import { env, hydrated, pageErrors, suspendedPayment, unique } from "./support";

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
