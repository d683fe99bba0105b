// The console at a phone's width (390 px: an approver on call approves from one) and at a
// wide desktop (1440 px): no page is wider than the window, Sign out stays on screen, and a
// screenshot of every page at both widths is written to end2end/screenshots/ (README:
// "Console screenshots"), so anyone can look at the console without running it.
import * as path from "node:path";
import { expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, suspendedPayment, unique } from "./support";

const WIDTHS = [390, 1440];
const SHOTS = path.join(__dirname, "..", "screenshots");

async function signInAs(page: Page): Promise<void> {
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(env("E2E_NAV_USER"));
  await page.getByLabel("Password").fill(env("E2E_NAV_PASSWORD"));
  await page.getByTestId("sign-in").click();
  await hydrated(page);
}

/** The page fits its window: nothing wider than the viewport, Sign out within it. */
async function fits(page: Page, width: number, name: string): Promise<void> {
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  // What sticks out: elements whose right edge passes the window, and panels whose content is
  // wider than the panel (a table spilling over its card).
  const culprits = await page.evaluate(() => {
    const out: string[] = [];
    const name = (e: Element) =>
      `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}${e.getAttribute("data-testid") ? "[" + e.getAttribute("data-testid") + "]" : ""}.${[...e.classList].join(".")}`;
    // A table wider than its panel scrolls sideways in its own box (DataTable's
    // `.table-scroll`): what is scrolled out of that box sticks out of nothing, but the box
    // itself must end within the window, and (since it scrolls) be a named region the
    // keyboard can reach.
    for (const e of document.querySelectorAll("body *")) {
      const box = e.classList.contains("table-scroll");
      if (!box && e.closest(".table-scroll")) continue;
      const r = e.getBoundingClientRect();
      if (r.right > window.innerWidth + 1 && (e.children.length === 0 || box)) out.push(`${name(e)} ends at ${Math.round(r.right)}`);
    }
    for (const p of document.querySelectorAll(".panel")) {
      if (p.scrollWidth > p.clientWidth + 1) out.push(`${name(p)} content ${p.scrollWidth} > ${p.clientWidth}`);
    }
    for (const b of document.querySelectorAll(".table-scroll")) {
      const reachable = b.getAttribute("tabindex") === "0" && b.getAttribute("role") === "region" && !!b.getAttribute("aria-label");
      if (b.scrollWidth > b.clientWidth + 1 && !reachable) out.push(`${name(b)} scrolls but is not a named, focusable region`);
    }
    return out.slice(0, 8);
  });
  expect.soft(overflow, `${name} at ${width} px is ${overflow} px wider than the window: ${culprits.join("; ")}`).toBeLessThanOrEqual(0);
  expect.soft(culprits, `${name} at ${width} px: nothing sticks out of the window or its panel`).toEqual([]);
  if (width < 760) {
    // A phone's controls are finger-sized: 44 px tall at least (WCAG 2.5.5; issue 41).
    const small = await page.evaluate(() =>
      [...document.querySelectorAll("button, a.button-link, select")]
        .filter((e) => {
          const r = e.getBoundingClientRect();
          return r.width > 1 && r.height > 1 && r.height < 44;
        })
        .map((e) => `${(e.textContent ?? "").trim().slice(0, 30)} (${Math.round(e.getBoundingClientRect().height)} px)`)
        .slice(0, 8),
    );
    expect.soft(small, `${name} at ${width} px: every button is at least 44 px tall`).toEqual([]);
  }
  const signOut = await page.getByTestId("sign-out").boundingBox();
  expect(signOut, "Sign out is shown").not.toBeNull();
  expect.soft(signOut!.x + signOut!.width, `Sign out is on screen at ${width} px`).toBeLessThanOrEqual(width);
}

for (const width of WIDTHS) {
  test(`every page fits a ${width} px window`, async ({ browser, request }) => {
    const key = env("E2E_MERCHANT_KEY");
    const idem = unique("idem");
    const paid = await createPayment(request, key, { amount: 18857, currency: "CNY", merchant_order_id: unique("layout") }, idem);
    const refund = await request.post(`/v1/payments/${paid.id}/refunds`, {
      headers: { Authorization: `Bearer ${key}`, "Idempotency-Key": unique("idem") },
      data: { amount: 1000, reason: "a partial refund with a reason long enough to wrap in its table cell" },
    });
    expect(refund.status(), await refund.text()).toBe(201);
    const suspended = await suspendedPayment(request, { amount: 2354, currency: "USD", merchant_order_id: unique("layout-s") });
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    await signInAs(page);
    // The key page's address, as the search gives it (keys are per merchant).
    const found = await page.request.get(`/ops/v1/search?q=${encodeURIComponent(idem)}`);
    expect(found.status(), await found.text()).toBe(200);
    const keyLink: string = (await found.json()).hits[0].link;
    const pages: [string, string][] = [
      ["dashboard", "/"],
      ["payments", "/payments"],
      ["payment", `/payments/${paid.id}`],
      ["payment-suspense", `/payments/${suspended.id}`],
      ["error-pool", "/error-pool"],
      ["approvals", "/approvals"],
      ["pauses", "/pauses"],
      ["audit", "/audit"],
      ["webhooks", "/webhooks"],
      ["users", "/admin/users"],
      ["merchants", "/admin/merchants"],
      ["search", "/search?q=idem-"],
      ["idempotency-key", keyLink],
    ];
    for (const [name, url] of pages) {
      await page.goto(url);
      await hydrated(page);
      await expect(page.locator("main h1")).toBeVisible();
      await page.screenshot({ path: path.join(SHOTS, `${name}-${width}.png`), fullPage: true });
      await fits(page, width, name);
    }
    await context.close();
  });
}
