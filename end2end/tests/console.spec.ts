// The ops console in a real browser (issue 5): sign in, watch the dashboard move as payments
// are made through the merchant API with the sandbox channel, open a payment's timeline and
// resolve an error-pool item. Users and merchants come from scripts/test.sh (see support.ts).
import * as path from "node:path";
import { expect, test } from "@playwright/test";
import { account, createPayment, env, hydrated, numberOf, open, pageErrors, signIn, suspendedPayment, unique, approvePrivilege, signInAs } from "./support";

test.describe.configure({ mode: "serial" });

test("without a session every console page sends you to the sign-in page", async ({ page }) => {
  for (const target of ["/", "/payments", "/error-pool", "/admin/users"]) {
    await page.goto(target);
    // The sign-in page remembers where to return (the dashboard needs no reminder).
    const back = target === "/" ? "" : `?next=${encodeURIComponent(target)}`;
    await expect(page).toHaveURL(new RegExp(`/login${back.replace("?", "\\?")}$`));
    await expect(page.getByRole("heading", { name: "Sign in" })).toBeVisible();
  }
});

test("a wrong password gets the one answer, and the form stays usable", async ({ page }) => {
  const { username } = account("viewer");
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill("not-the-password-at-all");
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("form-message")).toHaveText("unknown user or wrong password");
  await expect(page).toHaveURL(/\/login$/);
  await expect(page.getByLabel("Password")).toHaveValue("");
});

test("a viewer signs in, sees no admin or resolve controls, and signs out", async ({ page }) => {
  await signIn(page, "viewer");
  await expect(page.getByTestId("current-roles")).toHaveText("viewer");
  await expect(page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" })).toHaveCount(0);

  // The server refuses, whatever the page shows.
  await open(page, "/admin/users");
  await expect(page.getByRole("alert").filter({ hasText: "your roles do not allow this" })).toBeVisible();
  const refused = await page.request.post("/api/resolve_error", {
    form: { id: "1", note: "a viewer may not do this" },
  });
  expect(refused.ok()).toBe(false);
  expect(await refused.text()).toContain("your roles do not allow this");

  await open(page, "/error-pool?status=all");
  await expect(page.getByRole("heading", { name: "Error pool" })).toBeVisible();
  await expect(page.getByRole("button", { name: /Resolve/ })).toHaveCount(0);

  await page.getByTestId("sign-out").click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto("/");
  await expect(page).toHaveURL(/\/login$/);
});

test("a filter's URL names only the form's fields: no stray &= from the submit button", async ({ page }) => {
  await signIn(page, "viewer");
  await open(page, "/error-pool");
  await page.locator("form.filters select[name=status]").selectOption("all");
  await page.locator("form.filters").getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/\/error-pool\?status=all/);
  expect(new URL(page.url()).searchParams.has("")).toBe(false);

  await open(page, "/payments");
  await page.locator("form.filters select[name=status]").selectOption("SUCCESS");
  await page.getByTestId("search").click();
  await expect(page).toHaveURL(/\/payments\?.*status=SUCCESS/);
  expect(new URL(page.url()).searchParams.has("")).toBe(false);
});

test("a missing payment says so, with no events panel", async ({ page }) => {
  await signIn(page, "viewer");
  await open(page, "/payments/pay_no_such_payment_here");
  await expect(page.getByRole("alert").filter({ hasText: "no payment with id pay_no_such_payment_here" })).toBeVisible();
  await expect(page.getByTestId("payment-events")).toHaveCount(0);
  await expect(page.getByRole("heading", { name: "Events and webhooks" })).toHaveCount(0);
});

test("the dashboard moves as payments are made, without a reload", async ({ page, request }) => {
  const shop = env("E2E_MERCHANT_KEY");
  const errors = pageErrors(page);
  await signIn(page, "operator");
  await expect(page.getByRole("heading", { name: "Dashboard" })).toBeVisible();
  await expect(page.getByTestId("keyed-5m")).toBeVisible();

  const keyed = await numberOf(page, "keyed-5m");
  const replays = await numberOf(page, "replays-5m");
  const stuck = await numberOf(page, "stuck-total");
  const poolOpen = await numberOf(page, "pool-open-total");
  // Marks the page: a reload would lose it, so seeing it at the end proves there was none.
  await page.evaluate(() => ((window as unknown as { e2eMark: boolean }).e2eMark = true));

  // A first request and its replay (same key, same body): one replay among two keyed.
  const key = unique("idem");
  const order = unique("order");
  const first = await createPayment(request, shop, { amount: 1999, currency: "CNY", merchant_order_id: order }, key);
  const replay = await createPayment(request, shop, { amount: 1999, currency: "CNY", merchant_order_id: order }, key);
  expect(replay.id).toBe(first.id);
  // Digits 52: the sandbox answers slowly, so the payment passes through UNKNOWN.
  await createPayment(request, shop, { amount: 1052, currency: "CNY", merchant_order_id: unique("slow") }, unique("idem"));
  // Frozen while in flight: charged but not posted, so SUSPENSE (stuck at once) and an
  // error-pool item.
  const suspended = await suspendedPayment(request, {
    amount: 2554,
    currency: "USD",
    merchant_order_id: unique("frozen"),
  });

  const refresh = { timeout: 25_000, intervals: [1_000] };
  await expect.poll(() => numberOf(page, "keyed-5m"), refresh).toBeGreaterThanOrEqual(keyed + 4);
  await expect.poll(() => numberOf(page, "replays-5m"), refresh).toBeGreaterThanOrEqual(replays + 1);
  await expect.poll(() => numberOf(page, "pool-open-total"), refresh).toBeGreaterThanOrEqual(poolOpen + 1);
  await expect.poll(() => numberOf(page, "stuck-total"), refresh).toBeGreaterThanOrEqual(stuck + 1);
  expect(await page.evaluate(() => (window as unknown as { e2eMark?: boolean }).e2eMark)).toBe(true);

  // The stuck payment is listed with a link to its story.
  await expect(page.getByTestId("stuck-oldest").getByRole("link", { name: suspended.id })).toBeVisible();
  await expect(page.getByTestId("hit-chart")).toBeVisible();
  await page.screenshot({ path: path.join(__dirname, "..", "test-results", "dashboard.png"), fullPage: true });
  expect(errors).toEqual([]);
});

// Issue 41, honest actions: here, while the stuck list is short (it shows the 10 oldest).
test("a stuck payment's Retry is enabled where a job would wake, and disabled with the reason where none would", async ({ page, request }) => {
  const errors = pageErrors(page);
  // SUSPENSE (stuck at once) with its posting job waiting: a retry wakes it.
  const payment = await suspendedPayment(request, {
    amount: 1354,
    currency: "CNY",
    merchant_order_id: unique("stuck-retry"),
  });
  await signInAs(page, "E2E_POOL_OPERATOR");
  const table = page.getByTestId("stuck-oldest");
  await expect(table.getByRole("link", { name: payment.id })).toBeVisible({ timeout: 25_000 });
  const retry = page.getByTestId(`retry-${payment.id}`);
  await expect(retry).toBeEnabled();
  await expect(retry).not.toHaveAttribute("aria-describedby", /.+/);
  await expect(page.getByTestId(`retry-why-${payment.id}`)).toHaveCount(0);

  // Every row says what the server decided: a disabled Retry carries its reason, described
  // by it; an enabled one has none. (Which rows have no job to wake depends on the workers
  // at that moment; the server's rule itself is tested in server/tests/it/ops_console.rs.)
  const buttons = table.locator('button[data-testid^="retry-"]');
  for (let i = 0; i < (await buttons.count()); i++) {
    const button = buttons.nth(i);
    const id = ((await button.getAttribute("data-testid")) as string).slice("retry-".length);
    const why = page.getByTestId(`retry-why-${id}`);
    if (await button.isDisabled()) {
      await expect(why).toHaveText(/^Retry unavailable: .+\.$/);
      await expect(button).toHaveAttribute("aria-describedby", `retry-why-${id}`);
    } else {
      await expect(why).toHaveCount(0);
    }
  }

  // The enabled one does what it says, in the server's count.
  await retry.click();
  await expect(page.getByTestId("flash")).toHaveText(new RegExp(`^Retry of ${payment.id}: [1-9]\\d* jobs? woken\\.$`));
  await expect(page.getByTestId("flash")).not.toHaveClass(/tone-bad/);
  expect(errors).toEqual([]);
});

test("a payment's page tells its whole story", async ({ page, request }) => {
  const order = unique("story");
  const payment = await suspendedPayment(request, { amount: 4254, currency: "CNY", merchant_order_id: order });
  const errors = pageErrors(page);
  await signIn(page, "viewer");

  // Found by its merchant order id through the search form.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Payments" }).click();
  await page.getByLabel("Merchant order id").fill(order);
  await page.getByTestId("search").click();
  await expect(page).toHaveURL(new RegExp(`order=${order}`));
  const table = page.getByTestId("payments-table");
  await expect(table.getByRole("row")).toHaveCount(2);
  await expect(table).toContainText("42.54 CNY");
  await table.getByRole("link", { name: payment.id }).click();

  await expect(page).toHaveURL(new RegExp(`/payments/${payment.id}$`));
  await expect(page.getByTestId("payment-id")).toHaveText(payment.id);
  await expect(page.getByTestId("payment-status")).toHaveText("SUSPENSE", { timeout: 15_000 });
  const timeline = page.getByTestId("timeline");
  for (const event of ["created", "submit", "query_succeeded", "ledger_failed"]) {
    await expect(timeline.getByText(event, { exact: true }).first()).toBeVisible();
  }
  await expect(timeline).toContainText("merchant account frozen");
  // Amounts a person reads are in major units with the currency, never minor units beside it.
  await expect(timeline).toContainText("charged 42.54 CNY");
  await expect(page.locator("main")).not.toContainText("4254 CNY");
  await expect(page.getByTestId("related-errors")).toContainText("42.54 CNY charged but not posted");
  await expect(page.getByTestId("jobs")).toContainText("post_ledger");
  await expect(page.getByTestId("related-errors")).toContainText("suspense");
  expect(errors).toEqual([]);
});

test("an operator resolves an error-pool item with a note", async ({ page, request }) => {
  const payment = await suspendedPayment(request, {
    amount: 754,
    currency: "CNY",
    merchant_order_id: unique("resolve"),
  });
  const errors = pageErrors(page);
  await signIn(page, "operator");
  await open(page, "/error-pool?status=open&kind=suspense");
  const row = page.getByRole("row").filter({ hasText: payment.id });
  await expect(row).toHaveCount(1);

  await row.getByRole("button", { name: /Resolve/ }).click();
  const note = page.getByTestId("resolve-note");
  const text = `Merchant unfrozen by finance; posting retried (${unique("note")})`;
  await note.fill(text);
  await page.getByTestId("resolve-submit").click();
  await expect(page.getByTestId("flash")).toContainText("resolved");
  await expect(page.getByRole("row").filter({ hasText: payment.id })).toHaveCount(0);

  await open(page, "/error-pool?status=resolved&kind=suspense");
  const resolved = page.getByRole("row").filter({ hasText: payment.id });
  await expect(resolved).toContainText("resolved");
  await expect(resolved).toContainText(text);
  await expect(resolved).toContainText(`Resolved by ${account("operator").username}`);
  expect(errors).toEqual([]);
});

test("an operator acts on an error-pool item as its kind calls for, then retries a previewed selection", async ({ page, request }) => {
  const payment = await suspendedPayment(request, {
    amount: 854,
    currency: "CNY",
    merchant_order_id: unique("bulk"),
  });
  const errors = pageErrors(page);
  await signIn(page, "operator");
  await open(page, "/error-pool?status=open&kind=suspense");
  const row = page.getByRole("row").filter({ hasText: payment.id });
  await expect(row).toHaveCount(1);

  // One row: a suspense item's action is Retry (its posting job waits), and the page says
  // what the server counted, not what it hoped (issue 41).
  const act = row.getByRole("button", { name: "Retry", exact: true });
  await expect(act).toHaveAttribute("data-action", "retry");
  await expect(act).toBeEnabled();
  await act.click();
  await expect(page.getByTestId("flash")).toContainText(/Retry for item #\d+: [1-9]\d* jobs? woken; item #\d+ stays open\./);

  // The selection: preview first, then confirm with a reason.
  await page.getByTestId("bulk-error_pool-preview").click();
  const preview = page.getByTestId("bulk-preview");
  await expect(preview.getByRole("link", { name: payment.id })).toBeVisible();
  await page.getByTestId("bulk-reason").fill("ledger back after the merchant review");
  await page.getByTestId("bulk-confirm").click();
  await expect(page.getByTestId("bulk-result")).toContainText(/Retried [1-9]\d* payments?, waking \d+ jobs?; skipped \d+\./);
  await expect(preview).toHaveCount(0);

  // Query channel on the payment's page: the answer as a sentence in its tone, then its
  // fields, the raw JSON behind a toggle. The channel holds this charge (digits 54): green.
  await open(page, `/payments/${payment.id}`);
  await page.getByTestId("action-query").click();
  const flash = page.getByTestId("action-flash");
  await expect(flash).toContainText("SUCCESS at the channel: it holds a charge of 8.54 CNY");
  await expect(flash).toHaveAttribute("data-tone", "good");
  const answer = page.getByTestId("query-answer");
  await expect(answer).toContainText("Payment status now");
  await expect(answer.getByTestId("query-raw").locator("pre")).toBeHidden();
  await answer.getByTestId("query-raw").locator("summary").click();
  await expect(answer.getByTestId("query-raw").locator("pre")).toContainText('"outcome": "succeeded"');

  // A key the channel never committed (digits 53) is not a success, and does not read as one.
  const lost = await createPayment(
    request,
    env("E2E_MERCHANT_KEY"),
    { amount: 953, currency: "CNY", merchant_order_id: unique("lost") },
    unique("idem"),
  );
  await open(page, `/payments/${lost.id}`);
  await page.getByTestId("action-query").click();
  await expect(flash).toContainText("query executed:");
  await expect(flash).not.toContainText("SUCCESS at the channel");
  await expect(flash).toHaveAttribute("data-tone", /^(undecided|bad)$/);
  expect(errors).toEqual([]);
});

test("an admin adds a user, who can then sign in", async ({ page, browser }) => {
  await signIn(page, "admin");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click();
  const name = unique("auditor");
  const password = "a-fresh-password-42";
  const form = page.getByTestId("add-user");
  await form.getByLabel("Username").fill(name);
  await form.getByLabel("auditor").check();
  await form.getByLabel("Password").fill("short");
  await form.getByRole("button", { name: "Add user" }).click();
  await expect(form.getByRole("alert")).toContainText("at least 12 characters");
  await form.getByLabel("Password").fill(password);
  await form.getByRole("button", { name: "Add user" }).click();
  await expect(page.getByTestId("flash")).toContainText(`User ${name} added`);
  await expect(page.getByTestId(`user-${name}`)).toContainText("viewer, auditor");
  await expect(page.getByTestId(`user-${name}`).getByTestId("last-sign-in")).toHaveText("never");

  // The new user signs in in a separate browser context.
  const other = await browser.newContext();
  const newcomer = await other.newPage();
  await newcomer.goto("/login");
  await expect(newcomer.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await newcomer.getByLabel("Username").fill(name);
  await newcomer.getByLabel("Password").fill(password);
  await newcomer.getByTestId("sign-in").click();
  await expect(newcomer.getByTestId("current-user")).toHaveText(name);
  await expect(newcomer.getByTestId("current-roles")).toHaveText("viewer, auditor");

  // The admin sees the sign-in, and gives the user a role: the open session has it at its
  // next page load, without signing in again; the change is audited.
  await page.reload();
  await hydrated(page);
  const row = page.getByTestId(`user-${name}`);
  await expect(row.getByTestId("last-sign-in")).toHaveText(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
  await row.getByRole("button", { name: "Edit roles…" }).click();
  await row.getByTestId("roles-form").getByLabel("operator").check();
  await row.getByTestId("roles-save").click();
  // Operator gives power: a request a second admin approves with their password (issue 36).
  await expect(page.getByTestId("flash")).toContainText("awaits another admin");
  await expect(row.getByTestId("roles")).toHaveText("viewer, auditor");
  const second = await browser.newContext();
  const checker = await second.newPage();
  await signInAs(checker, "E2E_SECOND_ADMIN");
  await approvePrivilege(checker, `set the roles of ${name}`, env("E2E_SECOND_ADMIN_PASSWORD"));
  await second.close();
  await page.reload();
  await hydrated(page);
  await expect(row.getByTestId("roles")).toHaveText("viewer, operator, auditor");
  await newcomer.reload();
  await expect(newcomer.getByTestId("current-roles")).toHaveText("viewer, operator, auditor");

  // Disabling the user ends its session: its next request is sent back to sign in.
  // Disabling asks once more.
  await page.getByTestId(`user-${name}`).getByRole("button", { name: "Disable…" }).click();
  await page.getByTestId(`user-${name}`).getByRole("button", { name: `Confirm: disable ${name}` }).click();
  await expect(page.getByTestId(`user-${name}`)).toContainText("disabled");
  await newcomer.goto("/payments");
  await expect(newcomer).toHaveURL(/\/login\?next=%2Fpayments$/);
  await other.close();
});
