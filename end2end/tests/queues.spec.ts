// Work queues people act on (issue 17): the error pool's kind filter lists the kinds there are
// with their counts, items are grouped by kind and paged, ticked rows are resolved with one
// note after a preview (and leave the list, audited), evidence reads as fields with the JSON
// behind a toggle; an auditor reaches a payment's audit records from its page, with the
// chain status. Items are made the way production makes them: SUSPENSE payments (amount
// digits 54, merchant frozen) and conflicting channel callbacks (digits 55: a stale failure
// after the success). Everything this spec opens it resolves again.
import { APIRequestContext, expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, open, pageErrors, signIn, signInAs, suspendedPayment, unique } from "./support";

type Item = { id: number; kind: string; payment_id: string | null; occurrences: number; status: string };

/** The open error-pool item of `paymentId` and `kind`, once the server has reported it. */
async function itemOf(request: APIRequestContext, kind: string, paymentId: string): Promise<Item> {
  let found: Item | undefined;
  await expect
    .poll(
      async () => {
        const r = await request.get(`/ops/v1/error-pool?status=open&kind=${kind}&limit=500`);
        const items: Item[] = (await r.json()).items ?? [];
        found = items.find((i) => i.payment_id === paymentId);
        return !!found;
      },
      { timeout: 20_000, intervals: [250] },
    )
    .toBe(true);
  return found as Item;
}

/** Resolves `items` through the JSON API (clean-up: what a spec opens it closes). */
async function resolveAll(request: APIRequestContext, items: Item[], note: string): Promise<void> {
  for (let i = 0; i < items.length; i += 100) {
    const chunk = items.slice(i, i + 100);
    const preview = await request.get(`/ops/v1/error-pool/bulk-resolve/preview?ids=${chunk.map((c) => c.id).join(",")}`);
    const open: Item[] = (await preview.json()).items;
    if (open.length === 0) continue;
    const r = await request.post("/ops/v1/error-pool/bulk-resolve", {
      data: {
        selection: { ids: chunk.map((c) => c.id) },
        items: open.map((o) => ({ id: o.id, occurrences: o.occurrences })),
        note,
      },
    });
    expect(r.status(), await r.text()).toBe(200);
  }
}

function row(page: Page, paymentId: string) {
  return page.getByRole("row").filter({ hasText: paymentId });
}

test("an operator filters by kind from the list, resolves two ticked rows with one note, and an auditor finds the records from the payment page", async ({ page, request, browser }) => {
  test.setTimeout(120_000);
  const errors = pageErrors(page);
  const a = await suspendedPayment(request, { amount: 1254, currency: "CNY", merchant_order_id: unique("q-a") });
  const b = await suspendedPayment(request, { amount: 1354, currency: "CNY", merchant_order_id: unique("q-b") });
  const c = await createPayment(
    request,
    env("E2E_MERCHANT_KEY"),
    { amount: 18855, currency: "CNY", merchant_order_id: unique("q-c") },
    unique("idem"),
  );
  await signIn(page, "operator");
  const [itemA, itemB] = [await itemOf(page.request, "suspense", a.id), await itemOf(page.request, "suspense", b.id)];
  const itemC = await itemOf(page.request, "conflicting_callback", c.id);

  // The kind filter lists the kinds there are, each with its count.
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Error pool" }).click();
  await hydrated(page);
  const kind = page.getByLabel("Kind");
  await expect(kind.locator("option", { hasText: /^suspense \(\d+\)$/ })).toHaveCount(1);
  await expect(kind.locator("option", { hasText: /^conflicting_callback \(\d+\)$/ })).toHaveCount(1);
  await expect(page.getByTestId("group-suspense")).toBeVisible();
  await kind.selectOption("suspense");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/kind=suspense/);
  await expect(page.getByTestId("group-conflicting_callback")).toHaveCount(0);
  await expect(page.getByTestId("group-suspense").locator("tr.group-head")).toContainText(/suspense · \d+ items?/);

  // Tick two rows; the preview shows exactly those; one note resolves both.
  await row(page, a.id).getByRole("checkbox").check();
  await row(page, b.id).getByRole("checkbox").check();
  await expect(page.getByTestId("selection-summary")).toHaveText("Selected: 2 items.");
  await page.getByTestId("bulk-resolve-preview").click();
  const preview = page.getByTestId("resolve-preview");
  await expect(preview.locator("tbody tr")).toHaveCount(2);
  await expect(preview).toContainText(String(itemA.id));
  await expect(preview).toContainText(String(itemB.id));
  const note = `Merchants unfrozen by finance; postings retried (${unique("note")})`;
  await expect(page.getByTestId("bulk-note")).toBeFocused();
  await page.getByTestId("bulk-note").fill(note);
  await page.getByTestId("bulk-resolve-confirm").click();
  await expect(page.getByTestId("resolve-result")).toContainText("Resolved 2 items; skipped 0.");
  await expect(row(page, a.id)).toHaveCount(0);
  await expect(row(page, b.id)).toHaveCount(0);
  // They are resolved with the note, by this operator.
  await page.getByLabel("Status").selectOption("resolved");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/status=resolved/);
  await expect(row(page, a.id)).toContainText(note);
  await expect(row(page, b.id)).toContainText(`Resolved by ${env("E2E_OPERATOR_USER")}`);

  // The conflicting callback's evidence: fields with the amount in major units and the time
  // formatted, the raw JSON behind a toggle.
  // The kinds listed are those of the status shown: back to open ones first.
  await page.getByLabel("Status").selectOption("open");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/status=open/);
  await page.getByLabel("Kind").selectOption("conflicting_callback");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/kind=conflicting_callback/);
  const evidence = page.getByTestId(`evidence-${itemC.id}`);
  await expect(evidence).toContainText("188.55 CNY");
  await expect(evidence).not.toContainText("18855");
  await expect(evidence).toContainText(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
  const json = page.getByTestId(`evidence-json-${itemC.id}`);
  await expect(json.locator("pre")).toBeHidden();
  await json.locator("summary").click();
  await expect(json.locator("pre")).toBeVisible();
  await expect(json.locator("pre")).toContainText('"amount": 18855');
  await resolveAll(page.request, [itemC], "queues spec: clean-up");
  expect(errors).toEqual([]);

  // An auditor follows the payment page's link to its records, with the chain status.
  const context = await browser.newContext();
  const auditor = await context.newPage();
  const auditorErrors = pageErrors(auditor);
  await signIn(auditor, "auditor");
  await open(auditor, `/payments/${a.id}`);
  await auditor.getByTestId("payment-audit-link").click();
  await expect(auditor).toHaveURL(new RegExp(`/audit\\?payment=${a.id}$`));
  await expect(auditor.getByRole("heading", { name: "Audit log", level: 1 })).toBeVisible();
  await expect(auditor.getByTestId("filter-payment")).toHaveValue(a.id);
  await expect(auditor.getByTestId("chain-status")).toContainText("ok");
  await expect(auditor.getByTestId("chain-status")).toContainText("records verified");
  const records = auditor.getByTestId("audit-records");
  const resolved = records.getByRole("row").filter({ hasText: "error_resolved" });
  await expect(resolved).toHaveCount(1);
  await expect(resolved).toContainText(note);
  await expect(resolved).toContainText(env("E2E_OPERATOR_USER"));
  await expect(resolved.getByRole("link", { name: `error-pool item #${itemA.id}` })).toBeVisible();
  // The record links to its object: the item, shown alone in the error pool.
  await resolved.getByRole("link", { name: `error-pool item #${itemA.id}` }).click();
  await expect(auditor).toHaveURL(new RegExp(`/error-pool\\?status=all&item=${itemA.id}$`));
  await expect(auditor.getByTestId(`pool-item-${itemA.id}`)).toBeVisible();
  await expect(auditor.getByRole("row").filter({ hasText: b.id })).toHaveCount(0);
  // The item's own audit link leads back to the payment's records; Back and Forward
  // move between the two views.
  await auditor.getByTestId(`audit-link-${itemA.id}`).click();
  await expect(auditor).toHaveURL(new RegExp(`/audit\\?payment=${a.id}$`));
  await expect(records.getByRole("row").filter({ hasText: "error_resolved" })).toHaveCount(1);
  await auditor.goBack();
  await expect(auditor).toHaveURL(new RegExp(`/error-pool\\?status=all&item=${itemA.id}$`));
  await expect(auditor.getByTestId(`pool-item-${itemA.id}`)).toBeVisible();
  await auditor.goForward();
  await expect(auditor).toHaveURL(new RegExp(`/audit\\?payment=${a.id}$`));
  await expect(records.getByRole("row").filter({ hasText: "error_resolved" })).toHaveCount(1);
  // Filtering by action through the form keeps the payment and narrows the records.
  await auditor.getByTestId("filter-action").fill("error_resolved");
  await auditor.getByTestId("filter-submit").click();
  await expect(auditor).toHaveURL(new RegExp(`/audit\\?action=error_resolved&payment=${a.id}$`));
  await expect(records.locator("tbody tr")).toHaveCount(1);
  expect(auditorErrors).toEqual([]);
  await context.close();
});

test("the error pool pages through a kind 25 items at a time", async ({ page, request }) => {
  test.setTimeout(120_000);
  const errors = pageErrors(page);
  const key = env("E2E_MERCHANT_KEY");
  const payments = [];
  for (let i = 0; i < 27; i++) {
    payments.push(await createPayment(request, key, { amount: 1055 + i * 100, currency: "CNY", merchant_order_id: unique("q-page") }, unique("idem")));
  }
  await signIn(page, "operator");
  const items: Item[] = [];
  for (const p of payments) items.push(await itemOf(page.request, "conflicting_callback", p.id));
  try {
    await open(page, "/error-pool?status=open&kind=conflicting_callback");
    await expect(page.getByTestId("page-of")).toHaveText(/^Page 1 of [2-9]\d*$/);
    await expect(page.getByTestId("pool-table").locator("tr[data-testid^=pool-item-]")).toHaveCount(25);
    await expect(page.getByTestId("page-prev")).toHaveCount(0);
    await page.getByTestId("page-next").click();
    await expect(page).toHaveURL(/kind=conflicting_callback&page=1$/);
    await expect(page.getByTestId("page-of")).toHaveText(/^Page 2 of /);
    const second = await page.getByTestId("pool-table").locator("tr[data-testid^=pool-item-]").count();
    expect(second).toBeGreaterThanOrEqual(2);
    await page.getByTestId("page-prev").click();
    await expect(page).toHaveURL(/kind=conflicting_callback$/);
    await expect(page.getByTestId("page-of")).toHaveText(/^Page 1 of /);
    await page.goBack();
    await expect(page.getByTestId("page-of")).toHaveText(/^Page 2 of /);
    await page.reload();
    await hydrated(page);
    await expect(page.getByTestId("page-of")).toHaveText(/^Page 2 of /);
    expect(errors).toEqual([]);
  } finally {
    await resolveAll(page.request, items, "queues spec: clean-up");
  }
});

test("the dashboard's queue panel shows each lane with its backlog", async ({ page }) => {
  const errors = pageErrors(page);
  await signInAs(page, "E2E_LANES");
  const lanes = page.getByTestId("lanes-table");
  await expect(lanes).toBeVisible();
  for (const lane of ["forward", "compensation", "delivery", "background"]) {
    const row = page.getByTestId(`lane-${lane}`);
    await expect(row.getByRole("rowheader")).toHaveText(lane);
    // Due and running are counts; the backlog names merchants or says there is none.
    await expect(row.locator("td").nth(0)).toHaveText(/^\d+$/);
    await expect(row.locator("td").nth(1)).toHaveText(/^\d+$/);
  }
  await expect(lanes.getByRole("columnheader", { name: "Backlog by merchant (top 5)" })).toBeVisible();
  expect(errors).toEqual([]);
});
