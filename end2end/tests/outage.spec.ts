// An outage played end to end (issue 41's proof), as the people in it would. The merchant
// e2e-outage is routed to a connector of its own, `outage`: a second sandbox process
// (scripts/test.sh: E2E_OUTAGE_CHANNEL_URL), so its tile shows only this spec's attempts and
// its colour can be asserted. The channel works, then starts failing (the sandbox's fault
// switch: every new key answers 500 on its first two attempts, as a PSP's bad deploy would);
// the operator's open dashboard turns the tile red within a minute and names the reason; the
// operator follows the reason to its payments and requests a pause of submissions; the
// approver, on a phone over a throttled (Fast 4G) network, approves it; the banner reaches the
// operator's open page within about a second and every page after. The pause is ended and the
// channel healed in `finally`, whatever happens, so the shared server is left as found.
import { expect, Page, test } from "@playwright/test";
import { createPayment, env, go, hydrated, pageErrors, resumePauses, signInAs, unique } from "./support";

const WHAT = "submissions to the channel";

// Chromium DevTools' "Fast 4G" preset, as end2end/perf/tti.mjs measures the phone approver.
const FAST_4G = { offline: false, latency: 165, downloadThroughput: (9e6 / 8) * 0.9, uploadThroughput: (1.5e6 / 8) * 0.9 };

/** Sets the outage channel's fault switch (the sandbox's `PUT /faults`). */
async function faults(page: Page, body: { rate: number; kind?: string }): Promise<void> {
  const answer = await page.request.put(`${env("E2E_OUTAGE_CHANNEL_URL")}/faults`, { data: body });
  expect(answer.status(), await answer.text()).toBe(200);
}

test("an outage: the tile turns red with its reason, the operator pauses submissions, a phone on 4G approves, the banner shows everywhere", async ({
  browser,
  request,
}) => {
  // Two people, a throttled phone and a minute's wait for the tile: longer than one page's test.
  test.setTimeout(180_000);
  const shop = env("E2E_OUTAGE_MERCHANT_KEY");
  const pay = (amount: number, prefix: string) =>
    createPayment(request, shop, { amount, currency: "CNY", merchant_order_id: unique(prefix) }, unique("idem"));

  const desk = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  const operator = await desk.newPage();
  const operatorErrors = pageErrors(operator);
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const approver = await phone.newPage();
  const approverErrors = pageErrors(approver);
  try {
    // --- before: the channel answers, its tile is green ------------------------------------
    for (let i = 0; i < 3; i++) await pay(1000 + 100 * i, "outage-before");
    await signInAs(operator, "E2E_OUTAGE_OPERATOR");
    await go(operator, "Dashboard", "Dashboard");
    const tile = operator.getByTestId("channel-tile-outage");
    await expect(tile).toBeVisible({ timeout: 20_000 });
    await expect(tile).toHaveAttribute("data-level", "ok");
    await expect(operator.getByTestId("channel-level-outage")).toHaveText("OK");
    // From here the operator's page is never reloaded: a marker on `window` would be lost.
    await operator.evaluate(() => {
      (window as unknown as { __outage: boolean }).__outage = true;
    });

    // --- the channel starts failing --------------------------------------------------------
    await faults(operator, { rate: 1, kind: "error5xx" });
    const started = Date.now();
    const failing: string[] = [];
    for (let i = 0; i < 6; i++) failing.push((await pay(2000 + 100 * i, "outage-during")).id);

    // The open dashboard turns the tile red within a minute, in words as well as colour, and
    // the failures table names the reason.
    await expect(tile).toHaveAttribute("data-level", "red", { timeout: 60_000 });
    const redAfter = Date.now() - started;
    expect(redAfter).toBeLessThan(60_000);
    await expect(operator.getByTestId("channel-level-outage")).toHaveText("Red");
    const reasons = operator.getByTestId("channel-failures");
    await expect(reasons.getByTestId("failure-link-5xx")).toHaveText("5xx answer");
    await expect
      .poll(async () => Number(await reasons.getByTestId("failure-count-5xx").textContent()))
      .toBeGreaterThanOrEqual(failing.length);
    expect(await operator.evaluate(() => (window as unknown as { __outage?: boolean }).__outage)).toBe(true);

    // --- the operator follows the reason to the payments ------------------------------------
    await reasons.getByTestId("failure-link-5xx").click();
    await expect(operator).toHaveURL(/\/payments\?reason=5xx$/);
    await expect(operator.getByTestId("reason-filter")).toHaveValue("5xx");
    const table = operator.getByTestId("payments-table");
    for (const id of failing) await expect(table.getByRole("link", { name: id })).toBeVisible();

    // --- and asks for a pause of submissions ------------------------------------------------
    await go(operator, "Pauses", "Emergency switch");
    await operator.getByTestId("pause-target").selectOption("submissions");
    await operator.getByTestId("pause-reason").fill("channel answers 5xx to every charge");
    await operator.getByTestId("pause-submit").click();
    await expect(operator.getByTestId("flash")).toContainText("requested");
    const row = operator.locator('tr[data-target="submissions"]');
    await expect(row).toHaveAttribute("data-status", "pending");
    await expect(operator.getByTestId("pause-banner")).toHaveCount(0);

    // --- the approver, on a phone over Fast 4G, approves ----------------------------------------
    const cdp = await phone.newCDPSession(approver);
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", FAST_4G);
    await signInAs(approver, "E2E_OUTAGE_APPROVER");
    await go(approver, /^Approvals/, "Approvals");
    await expect(approver.getByTestId("pending-pauses")).toContainText("1 emergency-switch pause waits");
    await approver.getByTestId("pending-pauses").getByRole("link", { name: "Pauses page" }).click();
    await expect(approver.getByRole("heading", { name: "Emergency switch", level: 1 })).toBeVisible();
    await hydrated(approver);
    const apRow = approver.locator('tr[data-target="submissions"]');
    await expect(apRow).toContainText("channel answers 5xx to every charge");
    const approve = apRow.getByTestId("pause-approve");
    const box = await approve.boundingBox();
    expect(box?.height ?? 0, "a thumb-sized target on the phone").toBeGreaterThanOrEqual(44);
    await approve.tap();
    await approver.getByTestId("pause-password").fill(env("E2E_OUTAGE_APPROVER_PASSWORD"));
    await approver.getByTestId("pause-step-reason").fill("confirmed on the bridge: PSP incident");
    await approver.getByTestId("pause-step-submit").tap();
    await expect(approver.getByTestId("flash")).toContainText("now active");

    // --- the banner: on the operator's open page within about a second, then everywhere ----
    await expect(operator.getByTestId("pause-banner")).toContainText(WHAT, { timeout: 1_500 });
    await expect(row).toHaveAttribute("data-status", "active");
    for (const [link, heading] of [
      ["Dashboard", "Dashboard"],
      ["Payments", "Payments"],
      ["Error pool", "Error pool"],
      ["Webhooks", "Webhooks"],
    ]) {
      await go(operator, link, heading);
      await expect(operator.getByTestId("pause-banner")).toContainText(WHAT);
    }
    await expect(approver.getByTestId("pause-banner")).toContainText(WHAT);
    const overflow = await approver.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);

    expect(operatorErrors).toEqual([]);
    expect(approverErrors).toEqual([]);
  } finally {
    await faults(operator, { rate: 0 });
    await resumePauses(
      "submissions",
      { page: operator, password: env("E2E_OUTAGE_OPERATOR_PASSWORD") },
      { page: approver, password: env("E2E_OUTAGE_APPROVER_PASSWORD") },
      "outage.spec.ts cleanup",
    );
    await Promise.all([desk.close(), phone.close()]);
  }
});
