// Find anything, by any id (issue 17): the top bar's search box, reached with `/`, takes the
// start of any id in any case and lands on the thing (here an Idempotency-Key's page, with the
// stored response exactly as the merchant's retry received it, and from there its payment),
// or on a list when several match, or says that nothing does. Driven with the keyboard and
// clicks, as a person would. Signs in as a viewer of its own (E2E_SEARCH_USER).
import { expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, open, pageErrors, signIn, unique } from "./support";

/** `s` in alternating case: the search ignores case. */
function mixedCase(s: string): string {
  return [...s].map((c, i) => (i % 2 ? c.toLowerCase() : c.toUpperCase())).join("");
}

/** Presses `/` with the focus on the page, not in a field, and types `text` into the search box. */
async function find(page: Page, text: string): Promise<void> {
  await page.locator("main h1").first().click();
  await page.keyboard.press("/");
  await expect(page.getByTestId("find-input")).toBeFocused();
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
}

test("find by key, order id and payment id prefix, in any case; several give a list; none says so", async ({ page, request }) => {
  const errors = pageErrors(page);
  const shop = env("E2E_MERCHANT_KEY");
  const stem = unique("Srch");
  // A `/` in the key: its page's address holds it as one path segment.
  const key = `${stem}-Key/1`;
  const order = `${stem}-Order`;
  const body = { amount: 18857, currency: "CNY", merchant_order_id: order };
  const paid = await createPayment(request, shop, body, key);
  // The merchant retries: the stored response is replayed, and the key's page counts it.
  const again = await request.post("/v1/payments", {
    headers: { Authorization: `Bearer ${shop}`, "Idempotency-Key": key },
    data: body,
  });
  expect(again.headers()["idempotent-replayed"]).toBe("true");
  const replayed = await again.text();

  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(env("E2E_SEARCH_USER"));
  await page.getByLabel("Password").fill(env("E2E_SEARCH_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(env("E2E_SEARCH_USER"));
  await hydrated(page);

  // `/` focuses the box; the start of the key, in mixed case, lands on the key's page.
  await find(page, mixedCase(key.slice(0, -2)));
  await expect(page).toHaveURL(/\/keys\/\d+\/Srch-[^/]+-Key%2F1$/);
  await expect(page.getByTestId("key-id")).toHaveText(key);
  await expect(page.getByTestId("key-merchant")).toContainText("e2e-shop");
  await expect(page.getByTestId("key-state")).toHaveText("done");
  const head = page.getByTestId("key-response-head");
  await expect(head).toContainText("HTTP 201");
  await expect(head).toContainText("content-type: application/json");
  await expect(head).toContainText("idempotent-replayed: true");
  expect(await page.getByTestId("key-response-body").textContent()).toBe(replayed);
  await expect(page.getByTestId("key-outcome-replay")).toContainText("Replayed");
  await expect(page.getByTestId("key-outcome-replay").locator("td.num")).toHaveText("1");

  // The key's payment, and from the payment page back to its key.
  await page.getByTestId("key-payment").getByRole("link", { name: paid.id }).click();
  await expect(page).toHaveURL(new RegExp(`/payments/${paid.id}$`));
  await expect(page.getByTestId("payment-id")).toHaveText(paid.id);
  await page.getByTestId("payment-keys").getByRole("link", { name: key }).click();
  await expect(page.getByTestId("key-id")).toHaveText(key);

  // By merchant order id, shouted.
  await find(page, order.toUpperCase());
  await expect(page).toHaveURL(new RegExp(`/payments/${paid.id}$`));
  await expect(page.getByTestId("payment-id")).toHaveText(paid.id);

  // By the start of the payment id, in capitals.
  await page.goto("/");
  await hydrated(page);
  await find(page, paid.id.slice(0, 16).toUpperCase());
  await expect(page).toHaveURL(new RegExp(`/payments/${paid.id}$`));

  // A `/` typed into another field is just a character.
  await page.goto("/payments");
  await hydrated(page);
  const idField = page.getByLabel("Payment id");
  await idField.click();
  await page.keyboard.type("a/b");
  await expect(idField).toHaveValue("a/b");
  await expect(page.getByTestId("find-input")).not.toBeFocused();

  // The stem starts both the key and the order id: a list of both, each linked.
  await find(page, stem.toLowerCase());
  await expect(page).toHaveURL(/\/search\?q=/);
  const hits = page.getByTestId("search-hit");
  await expect(hits).toHaveCount(2);
  await expect(hits.filter({ hasText: "Idempotency-Key" }).getByRole("link", { name: key })).toBeVisible();
  await hits.filter({ hasText: "Merchant order id" }).getByRole("link", { name: order }).click();
  await expect(page).toHaveURL(new RegExp(`/payments/${paid.id}$`));
  // Back to the list, which still shows both.
  await page.goBack();
  await expect(page.getByTestId("search-hit")).toHaveCount(2);

  // Nothing matches: said next to the box, and the page stays.
  const here = page.url();
  await find(page, `${stem}-nothing`);
  await expect(page.getByTestId("find-message")).toHaveText(`Nothing matches “${stem}-nothing”.`);
  expect(page.url()).toBe(here);
  expect(errors).toEqual([]);
});

test("an order id's middle and an amount find the payment; % and _ are plain characters (issue 41)", async ({ page, request }) => {
  const errors = pageErrors(page);
  const shop = env("E2E_MERCHANT_KEY");
  const stem = unique("Mid");
  // Amount digits 12: an ordinary success. Major units 10000.12 to 99999.12, so no other
  // payment is likely to share it.
  const major = 10_000 + Math.floor(Math.random() * 90_000);
  const amount = major * 100 + 12;
  const order = `inv/${stem}%_1`;
  const paid = await createPayment(request, shop, { amount, currency: "CNY", merchant_order_id: order }, unique("idem"));
  // Its twin but for the `%_`, which a wildcard would also match.
  const twin = await createPayment(request, shop, { amount: 100, currency: "CNY", merchant_order_id: `inv/${stem}ab1` }, unique("idem"));

  await signIn(page, "viewer");
  // The middle of the order id, shouted, with its `%_`: only that payment.
  await find(page, `${stem}%_`.toUpperCase());
  await expect(page).toHaveURL(new RegExp(`/payments/${paid.id}$`));
  await expect(page.getByTestId("payment-id")).toHaveText(paid.id);

  // The middle both share: a list of both, the kind named.
  await find(page, stem.toLowerCase());
  await expect(page).toHaveURL(/\/search\?q=/);
  const hits = page.getByTestId("search-hit");
  await expect(hits).toHaveCount(2);
  await expect(hits.filter({ hasText: "Merchant order id" })).toHaveCount(2);
  await expect(hits.getByRole("link", { name: `inv/${stem}ab1` })).toBeVisible();

  // The amount as people read it, and in minor units: the payment itself.
  await find(page, `${major}.12`);
  await expect(page).toHaveURL(new RegExp(`/payments/${paid.id}$`));
  await open(page, `/search?q=${amount}`);
  const byAmount = page.locator('[data-testid="search-hit"][data-kind="amount"]');
  await expect(byAmount.getByRole("link", { name: paid.id })).toBeVisible();
  await expect(byAmount.filter({ hasText: paid.id })).toContainText(`${major}.12 CNY`);
  await expect(page.getByTestId("search-hit").getByRole("link", { name: twin.id })).toHaveCount(0);
  expect(errors).toEqual([]);
});
