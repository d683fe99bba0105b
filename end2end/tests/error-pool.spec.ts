// Honest actions (issue 41), as an operator meets them: an error-pool item's action that the
// server refuses says so in the error tone, never in the success green (the stuck list's
// Retry is in console.spec.ts, which runs while that list is short). Signs in as an operator
// of its own (E2E_POOL_OPERATOR, scripts/test.sh).
import { expect, test } from "@playwright/test";
import { open, pageErrors, signInAs, suspendedPayment, unique } from "./support";

test("an item action the server refuses is said in the error tone, not in green", async ({ page, request }) => {
  const errors = pageErrors(page);
  const payment = await suspendedPayment(request, {
    amount: 1454,
    currency: "CNY",
    merchant_order_id: unique("refused"),
  });
  await signInAs(page, "E2E_POOL_OPERATOR");
  await open(page, "/error-pool?status=open&kind=suspense");
  const row = page.getByRole("row").filter({ hasText: payment.id });
  await expect(row).toHaveCount(1);
  const act = row.locator('button[data-testid^="item-action-"]');
  await expect(act).toBeEnabled();

  // Meanwhile the item is resolved in another tab (as a colleague would), so the action
  // offered here is refused when it is clicked.
  const other = await page.context().newPage();
  await open(other, "/error-pool?status=open&kind=suspense");
  const there = other.getByRole("row").filter({ hasText: payment.id });
  await there.getByRole("button", { name: /Resolve/ }).click();
  await other.getByTestId("resolve-note").fill("settled with finance by phone");
  await other.getByTestId("resolve-submit").click();
  await expect(other.getByTestId("flash")).toContainText("resolved");
  await expect(other.getByTestId("flash")).not.toHaveClass(/tone-bad/);
  await other.close();

  await act.click();
  const flash = page.getByTestId("flash");
  await expect(flash).toContainText(/for item #\d+ refused: .*already resolved/);
  await expect(flash).toHaveClass(/tone-bad/);
  // Red, not the success green.
  const color = await flash.evaluate((el) => getComputedStyle(el).color);
  const ok = await page.evaluate(() => {
    const probe = document.createElement("p");
    probe.className = "flash";
    probe.textContent = "probe";
    document.body.appendChild(probe);
    const c = getComputedStyle(probe).color;
    probe.remove();
    return c;
  });
  expect(color).not.toBe(ok);
  expect(errors).toEqual([]);
});
