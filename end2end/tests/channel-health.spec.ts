// Channel health on the dashboard (issue 41): the channel answers charges with 5xx (the
// sandbox's amount digits 56: a 5xx on the first two attempts) and declines (51); the viewer
// sees the sandbox connector's tile with its per-minute chart, finds the failures grouped by
// reason, and follows "5xx answer" to the payments list filtered by that reason, which lists
// the payments the 5xx answers were for. Other specs charge the same sandbox at the same time,
// so the tile's colour is not asserted here (the server tests decide it on known attempts);
// only that it is one of the three and says so in words.
import { expect, test } from "@playwright/test";
import { createPayment, env, hydrated, pageErrors, signIn, unique } from "./support";

test("the channel tile shows the failures, and a reason leads to its payments", async ({ page, request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const failed: string[] = [];
  for (let i = 0; i < 3; i++) {
    const p = await createPayment(
      request,
      shop,
      { amount: 1056 + 100 * i, currency: "CNY", merchant_order_id: unique("channel-5xx") },
      unique("idem"),
    );
    failed.push(p.id);
  }
  await createPayment(
    request,
    shop,
    { amount: 2051, currency: "CNY", merchant_order_id: unique("channel-decline") },
    unique("idem"),
  );

  const errors = pageErrors(page);
  await signIn(page, "viewer");
  const panel = page.getByTestId("channel-health");
  await expect(panel.getByRole("heading", { name: /Channel health/ })).toBeVisible();

  // The sandbox's tile: a level in words matching its colour, the share, the chart.
  const tile = page.getByTestId("channel-tile-sandbox");
  await expect(tile).toBeVisible();
  await expect(tile).toHaveAttribute("data-level", /^(ok|amber|red)$/);
  const level = await tile.getAttribute("data-level");
  const words: Record<string, string> = { ok: "OK", amber: "Amber", red: "Red" };
  await expect(page.getByTestId("channel-level-sandbox")).toHaveText(words[level ?? "ok"]);
  await expect(page.getByTestId("channel-share-sandbox")).toHaveText(/%$/);
  await expect(page.getByTestId("channel-hour-sandbox")).toContainText("undecidable");
  await expect(tile.getByTestId("channel-chart-minutes")).toBeVisible();

  // The failures by reason: at least our three 5xx answers and one decline.
  const failures = page.getByTestId("channel-failures");
  await expect(failures.getByTestId("failure-link-5xx")).toHaveText("5xx answer");
  expect(Number(await failures.getByTestId("failure-count-5xx").textContent())).toBeGreaterThanOrEqual(3);
  await expect(failures.getByTestId("failure-link-decline:card_declined")).toHaveText("Declined: card_declined");

  // Followed: the payments list, filtered by the reason, with our payments in it.
  await failures.getByTestId("failure-link-5xx").click();
  await expect(page).toHaveURL(/\/payments\?reason=5xx$/);
  await hydrated(page);
  await expect(page.getByTestId("reason-filter")).toHaveValue("5xx");
  const table = page.getByTestId("payments-table");
  for (const id of failed) {
    await expect(table.getByRole("link", { name: id })).toBeVisible();
  }
  // A payment that was charged at once is not among them.
  const ok = await createPayment(
    request,
    shop,
    { amount: 1000, currency: "CNY", merchant_order_id: unique("channel-ok") },
    unique("idem"),
  );
  await page.reload();
  await hydrated(page);
  await expect(table.getByRole("link", { name: failed[0] })).toBeVisible();
  await expect(table.getByRole("link", { name: ok.id })).toHaveCount(0);
  expect(errors).toEqual([]);
});
