// The Merchants page (issue 13 "Merchant keys"): an admin adds a merchant, a second admin
// approves its first key and copies it (shown once), they rotate it (a new key, then the old
// one revoked: 401 at once), and the admin freezes the merchant (its new payments get 403
// merchant_frozen; reads still work).
import { expect, test } from "@playwright/test";
import { approvePrivilege, cli, env, hydrated, pageErrors, signInAs, unique } from "./support";

test("an admin rotates a merchant's key and freezes the merchant", async ({ page, request, browser }) => {
  const errors = pageErrors(page);
  // An admin of its own: the shared admin's sign-ins are spent by the other tests.
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(env("E2E_MERCHANTS_USER"));
  await page.getByLabel("Password").fill(env("E2E_MERCHANTS_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await hydrated(page);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Merchants" }).click();
  await expect(page.getByRole("heading", { name: "Merchants", level: 1 })).toBeVisible();

  const name = unique("shop");
  const form = page.getByTestId("add-merchant");
  await form.getByLabel("Merchant name").fill(name);
  await form.getByRole("button", { name: "Add merchant" }).click();
  // The merchant is added at once, with no key: its first key is a request a second admin
  // approves with their password, who is shown the key once (issue 36).
  await expect(page.getByTestId("flash")).toContainText(`Merchant ${name} added; its first key`);
  await expect(page.getByTestId("flash")).toContainText("awaits another admin");
  await expect(page.getByTestId("new-key-value")).toHaveCount(0);
  const panel = page.getByTestId(`merchant-${name}`);
  await expect(panel).toContainText("0 live key(s)");
  const checkerContext = await browser.newContext();
  const checker = await checkerContext.newPage();
  await signInAs(checker, "E2E_MERCHANTS2");
  await approvePrivilege(checker, `merchant ${name}`, env("E2E_MERCHANTS2_PASSWORD"));
  const first = (await checker.getByTestId("new-key-value").textContent()) ?? "";
  expect(first).toMatch(/^ck_live_[0-9a-f]{64}$/);
  // A Copy button puts the key on the clipboard (issue 41).
  await checkerContext.grantPermissions(["clipboard-read", "clipboard-write"]);
  await checker.getByTestId("copy-key").click();
  await expect(checker.getByTestId("copy-key")).toHaveText("Copied");
  expect(await checker.evaluate(() => navigator.clipboard.readText())).toBe(first);
  await page.reload();
  await hydrated(page);
  await expect(panel).toContainText("1 live key(s)");

  const pay = (key: string, order: string) =>
    request.post("/v1/payments", {
      headers: { Authorization: `Bearer ${key}`, "Idempotency-Key": unique("idem") },
      data: { amount: 1200, currency: "CNY", merchant_order_id: order },
    });
  const paid = await pay(first, unique("order"));
  expect(paid.status(), await paid.text()).toBe(201);
  const payment = await paid.json();

  // The merchant's own page (issue 41): its state, latest payments and keys in one place; the
  // admin is no auditor, so no history panel.
  await panel.getByRole("link", { name: /Its page/ }).click();
  await expect(page.getByTestId("merchant-name")).toHaveText(name);
  await expect(page.getByTestId("merchant-state")).toHaveText("active");
  await expect(page.getByTestId("merchant-payments").getByRole("link", { name: payment.id })).toBeVisible();
  await expect(page.getByTestId("merchant-keys")).toContainText(first.slice(0, 16));
  await expect(page.getByTestId("merchant-endpoints")).toContainText("No endpoint registered.");
  await expect(page.getByTestId("merchant-history")).toHaveCount(0);
  await page.goBack();
  await hydrated(page);

  // Rotation: a second key; both work until the first is revoked. Issuing a key is a request
  // a second admin approves with their password, who is shown the key once (issue 36).
  await panel.getByRole("button", { name: "Request a new key" }).click();
  await expect(page.getByTestId("flash")).toContainText("awaits another admin");
  await expect(panel.getByRole("row")).toHaveCount(2);
  await approvePrivilege(checker, `merchant ${name}`, env("E2E_MERCHANTS2_PASSWORD"));
  const second = (await checker.getByTestId("new-key-value").textContent()) ?? "";
  expect(second).toMatch(/^ck_live_[0-9a-f]{64}$/);
  expect(second).not.toBe(first);
  await page.reload();
  await hydrated(page);
  await expect(panel.getByRole("row")).toHaveCount(3);
  expect((await pay(second, unique("order"))).status()).toBe(201);

  const firstRow = panel.getByRole("row").filter({ hasText: first.slice(0, 16) });
  await firstRow.getByRole("button", { name: "Revoke…" }).click();
  await firstRow.getByRole("button", { name: "Confirm revoke" }).click();
  await expect(page.getByTestId("flash")).toContainText("revoked");
  await expect(panel.getByRole("row").filter({ hasText: first.slice(0, 16) })).toContainText("revoked");
  expect((await pay(first, unique("order"))).status()).toBe(401);
  expect((await pay(second, unique("order"))).status()).toBe(201);

  // Freeze asks for confirmation and a reason (issue 41): "Keep it active" and a blank reason
  // change nothing.
  await panel.getByRole("button", { name: "Freeze…" }).click();
  const confirm = page.getByTestId(`freeze-confirm-${name}`);
  await expect(confirm).toContainText("refuses this merchant's new payments");
  await confirm.getByRole("button", { name: "Keep it active" }).click();
  await expect(confirm).toHaveCount(0);
  expect((await pay(second, unique("order"))).status()).toBe(201);
  await panel.getByRole("button", { name: "Freeze…" }).click();
  await confirm.getByRole("button", { name: "Confirm freeze" }).click();
  await expect(panel.getByRole("alert").first()).toContainText("Say why the merchant is frozen");
  expect((await pay(second, unique("order"))).status()).toBe(201);
  // Then frozen: new payments refused, reads still answered.
  await confirm.getByTestId("freeze-reason").fill("chargeback spike under review");
  await confirm.getByRole("button", { name: "Confirm freeze" }).click();
  await expect(page.getByTestId("flash")).toContainText(`Merchant ${name} frozen`);
  await expect(page.getByTestId(`merchant-${name}`)).toContainText("frozen");
  const refused = await pay(second, unique("order"));
  expect(refused.status()).toBe(403);
  expect((await refused.json()).error.code).toBe("merchant_frozen");
  const read = await request.get(`/v1/payments/${payment.id}`, { headers: { Authorization: `Bearer ${second}` } });
  expect(read.status()).toBe(200);
  // Unfreezing is a request too: still frozen until the second admin approves.
  await page.getByTestId(`merchant-${name}`).getByRole("button", { name: "Unfreeze" }).click();
  await expect(page.getByTestId("flash")).toContainText("awaits another admin");
  expect((await pay(second, unique("order"))).status()).toBe(403);
  await approvePrivilege(checker, `unfreeze merchant ${name}`, env("E2E_MERCHANTS2_PASSWORD"));
  expect((await pay(second, unique("order"))).status()).toBe(201);

  // Its own Stripe account (issue 38): a request the second admin approves, since it decides
  // where the merchant's money goes; the secret key is never shown again, only its last four
  // characters. Back to the default connector is one step.
  const connector = page.getByTestId(`connector-${name}`);
  await expect(connector).toContainText("sandbox (the default)");
  await panel.getByRole("button", { name: "Connector…" }).click();
  const connectorForm = page.getByTestId(`connector-form-${name}`);
  await connectorForm.getByLabel("Stripe API base").fill("https://api.stripe.example");
  await connectorForm.getByLabel("Secret key (sk_…)").fill("sk_test_e2e_console_4321");
  await connectorForm.getByLabel("Reason").fill("the merchant moves to its own account");
  await connectorForm.getByRole("button", { name: "Save connector" }).click();
  await expect(page.getByTestId("flash")).toContainText("awaits another admin");
  await expect(connector).toContainText("sandbox (the default)");
  await approvePrivilege(checker, `put merchant ${name}`, env("E2E_MERCHANTS2_PASSWORD"));
  await checkerContext.close();
  await page.reload();
  await hydrated(page);
  await expect(connector).toContainText("key …4321");
  await expect(page.locator("body")).not.toContainText("sk_test_e2e_console");
  await panel.getByRole("button", { name: "Connector…" }).click();
  await connectorForm.getByLabel("Connector").selectOption("sandbox");
  await connectorForm.getByRole("button", { name: "Save connector" }).click();
  await expect(page.getByTestId("flash")).toContainText("go to the default connector");
  await expect(connector).toContainText("sandbox (the default)");

  // Its fees (issue 35): none until a pricing is set on the server's command line; from then
  // on each capture pays it, and the payment page shows the fee and the net in major units.
  const fees = page.getByTestId(`fees-${name}`);
  await expect(fees).toHaveText("Fees: none");
  expect(cli("merchant", "pricing", name, "--percent", "2.9", "--fixed", "30")).toContain("v1 percent=2.9 fixed=30");
  await page.reload();
  await hydrated(page);
  await expect(fees).toContainText("2.9 % + 30 minor units");
  const priced = await pay(second, unique("order"));
  expect(priced.status(), await priced.text()).toBe(201);
  const pricedId: string = (await priced.json()).id;
  // 2.9 % of 1200 is 34.8, rounded to 35, plus 30.
  await expect
    .poll(
      async () => {
        const read = await request.get(`/v1/payments/${pricedId}`, { headers: { Authorization: `Bearer ${second}` } });
        const body = await read.json();
        return [body.fee, body.net];
      },
      { timeout: 20_000 },
    )
    .toEqual([65, 1135]);
  await page.goto(`/payments/${pricedId}`);
  await hydrated(page);
  await expect(page.getByTestId("payment-fee")).toContainText("0.65 CNY");
  await expect(page.getByTestId("payment-fee")).toContainText("net 11.35 CNY");
  await page.goto("/admin/merchants");
  await hydrated(page);

  // At 1440 px every key table fits its panel: Revoke is never cut off (issue 41).
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.reload();
  await hydrated(page);
  const keyTables = page.locator("table.keys");
  expect(await keyTables.count()).toBeGreaterThan(0);
  const overflowing = await keyTables.evaluateAll(
    (tables) =>
      tables.filter((t) => {
        const box = t.parentElement as HTMLElement;
        return box.scrollWidth > box.clientWidth + 1;
      }).length,
  );
  expect(overflowing).toBe(0);
  expect(errors).toEqual([]);
});
