// Every console page works however it is reached: by the navigation (client-side routing),
// by reload, by deep link, and by Back and Forward. Once /payments failed on client
// navigation ("missing field `query`": a search without filters sent no arguments) and
// worked only after a full reload.
import { expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, pageErrors, unique } from "./support";

const PAGES: { link: string; url: RegExp; heading: string }[] = [
  { link: "Payments", url: /\/payments$/, heading: "Payments" },
  { link: "Error pool", url: /\/error-pool$/, heading: "Error pool" },
  { link: "Webhooks", url: /\/webhooks$/, heading: "Webhooks" },
  { link: "Approvals", url: /\/approvals$/, heading: "Approvals" },
  { link: "Pauses", url: /\/pauses$/, heading: "Emergency switch" },
  { link: "Audit", url: /\/audit$/, heading: "Audit log" },
  { link: "Users", url: /\/admin\/users$/, heading: "Users" },
  { link: "Merchants", url: /\/admin\/merchants$/, heading: "Merchants" },
  { link: "Dashboard", url: /\/$/, heading: "Dashboard" },
];

/** The page shows its heading and no error (a failed server function shows an alert). */
async function shows(page: Page, heading: string): Promise<void> {
  await expect(page.getByRole("heading", { name: heading, level: 1 })).toBeVisible();
  await expect(page.locator("main")).not.toContainText("error deserializing");
  await expect(page.locator(".error-note, [role=alert].error")).toHaveCount(0);
}

test("every page works by navigation, reload, deep link, Back and Forward", async ({ page, request }) => {
  const errors = pageErrors(page);
  const idem = unique("idem");
  const payment = await createPayment(
    request,
    env("E2E_MERCHANT_KEY"),
    { amount: 1234, currency: "CNY", merchant_order_id: unique("nav") },
    idem,
  );
  // A deep link opened while signed out: sign in, and land on the link, not the dashboard.
  await page.goto(`/payments/${payment.id}?from=mail`);
  await expect(page).toHaveURL(new RegExp(`/login\\?next=${encodeURIComponent(`/payments/${payment.id}?from=mail`)}$`));
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  // A user who holds every role sees every link.
  await page.getByLabel("Username").fill(env("E2E_NAV_USER"));
  await page.getByLabel("Password").fill(env("E2E_NAV_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await expect(page).toHaveURL(new RegExp(`/payments/${payment.id}\\?from=mail$`));
  await expect(page.getByTestId("payment-id")).toHaveText(payment.id);
  await hydrated(page);
  // Only the actions its state allows are offered, and the page says why not the others:
  // a settled SUCCESS payment has no job a retry could wake.
  await expect(page.getByTestId("action-reverse")).toBeVisible();
  await expect(page.getByTestId("action-retry")).toHaveCount(0);
  await expect(page.getByTestId("unavailable-actions")).toContainText("No retry: no job is waiting or dead");
  // Signed in, the foot of each page says which database runs and that it answers.
  await expect(page.getByTestId("db-status")).toContainText(/database: (sqlite|postgres) ✓/);
  await page.evaluate(() => ((window as unknown as { navMark: boolean }).navMark = true));

  const nav = page.getByRole("navigation", { name: "Main" });
  for (const p of PAGES) {
    await nav.getByRole("link", { name: new RegExp(`^${p.link}( ?\\d+ waiting)?$`) }).click();
    await expect(page).toHaveURL(p.url);
    await shows(page, p.heading);
  }
  // All of that was client-side: the mark set before survives only without a reload.
  expect(await page.evaluate(() => (window as unknown as { navMark?: boolean }).navMark)).toBe(true);

  // Back through every page, then Forward through them again.
  for (const p of [...PAGES].reverse().slice(1)) {
    await page.goBack();
    await expect(page).toHaveURL(p.url);
    await shows(page, p.heading);
  }
  for (const p of PAGES.slice(1)) {
    await page.goForward();
    await expect(page).toHaveURL(p.url);
    await shows(page, p.heading);
  }

  // Reload and deep link of each, from a fresh load of the dashboard.
  await page.goto("/");
  await hydrated(page);
  await shows(page, "Dashboard");
  for (const p of PAGES) {
    await nav.getByRole("link", { name: new RegExp(`^${p.link}( ?\\d+ waiting)?$`) }).click();
    await expect(page).toHaveURL(p.url);
    await page.reload();
    await hydrated(page);
    await shows(page, p.heading);
  }

  // The payment page and its way back to the list; the search's "Clear".
  await page.goto(`/payments/${payment.id}`);
  await hydrated(page);
  await expect(page.getByTestId("payment-id")).toHaveText(payment.id);
  await page.getByRole("link", { name: "← Payments" }).click();
  await expect(page).toHaveURL(/\/payments$/);
  await shows(page, "Payments");
  await page.getByLabel("Payment id").fill(payment.id);
  await page.getByTestId("search").click();
  // Only the filters given are in the URL (no `id=&merchant=&...`, no trailing `&=`).
  await expect(page).toHaveURL(new RegExp(`/payments\\?id=${payment.id}$`));
  await expect(page.getByTestId("payments-table").getByRole("link", { name: payment.id })).toBeVisible();
  await page.getByRole("link", { name: "Clear" }).click();
  await expect(page).toHaveURL(/\/payments$/);
  await shows(page, "Payments");
  await page.goBack();
  await expect(page).toHaveURL(new RegExp(`id=${payment.id}`));
  await expect(page.getByTestId("payments-table").getByRole("link", { name: payment.id })).toBeVisible();

  // The payment's Idempotency-Key page and the search results page (issue 17), reached by
  // clicks, then by reload, Back and Forward.
  await page.goto(`/payments/${payment.id}`);
  await hydrated(page);
  await page.getByTestId("payment-keys").getByRole("link", { name: idem }).click();
  await expect(page).toHaveURL(/\/keys\/\d+\/idem-/);
  await shows(page, `Idempotency-Key ${idem}`);
  const keyUrl = page.url();
  await page.reload();
  await hydrated(page);
  await shows(page, `Idempotency-Key ${idem}`);
  await page.getByTestId("find-input").fill("idem-");
  await page.getByTestId("find-input").press("Enter");
  await expect(page).toHaveURL(/\/search\?q=idem-$/);
  await shows(page, "Search");
  await expect(page.getByTestId("search-hit").first()).toBeVisible();
  await page.reload();
  await hydrated(page);
  await shows(page, "Search");
  await expect(page.getByTestId("search-hit").first()).toBeVisible();
  await page.goBack();
  await expect(page).toHaveURL(keyUrl);
  await shows(page, `Idempotency-Key ${idem}`);
  await page.goForward();
  await expect(page).toHaveURL(/\/search\?q=idem-$/);
  await shows(page, "Search");
  await expect(page.getByTestId("search-hit").first()).toBeVisible();
  expect(errors).toEqual([]);
});
