// The emergency switch (issue 17 "Emergency switch"): an operator requests a pause on the
// Pauses page, a different person (an approver) approves it with the password, every page
// shows the banner and /metrics reports it, the operator ends it with the password again,
// which (before the server's --pause-min-duration-secs, 15 minutes by default) is a request
// the approver approves with the password (issue 36), and the banner goes. The pause is of `reconcile` jobs (queued only by a statement import, which no
// other spec makes, so holding them changes nothing other specs see), and it is resumed in `finally` whatever
// happens, so the shared server is left as it was found.
import { expect, Page, test } from "@playwright/test";
import { axeScan, env, go, hydrated, pageErrors, resumePauses } from "./support";

const TARGET = "job:reconcile";
const WHAT = "reconcile jobs";

async function signInAs(page: Page, username: string, password: string): Promise<void> {
  await page.goto("/login");
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  await hydrated(page);
}

/** The count beside "Approvals" in the navigation (0 when none is shown). */
async function navCount(page: Page): Promise<number> {
  const c = page.getByTestId("approvals-count");
  return (await c.count()) ? parseInt(await c.innerText(), 10) : 0;
}

async function gauge(page: Page): Promise<string | undefined> {
  const text = await (await page.request.get("/metrics")).text();
  return text.split("\n").find((l) => l.startsWith(`converge_pause_active{target="${TARGET}"}`));
}

test("a pause is requested, approved by someone else, shown on every page, and resumed", async ({ page, browser }) => {
  const operator = { user: env("E2E_PAUSE_OPERATOR_USER"), password: env("E2E_PAUSE_OPERATOR_PASSWORD") };
  const approver = { user: env("E2E_PAUSE_APPROVER_USER"), password: env("E2E_PAUSE_APPROVER_PASSWORD") };
  const errors = pageErrors(page);
  const approverContext = await browser.newContext();
  const ap = await approverContext.newPage();
  await signInAs(page, operator.user, operator.password);
  try {
    // --- the approver has the inbox open before anything is asked -----------------------
    await signInAs(ap, approver.user, approver.password);
    await go(ap, "Approvals", "Approvals");
    // What is waiting now, by the server; the page shows the same before anything moves.
    const waiting = await ap.request.post("/api/pending_approvals", { form: {} });
    expect(waiting.ok(), await waiting.text()).toBe(true);
    const before = Number(await waiting.text());
    await expect.poll(() => navCount(ap)).toBe(before);

    // --- the operator requests ----------------------------------------------------------
    await go(page, "Pauses", "Emergency switch");
    await expect(page.getByTestId("pause-banner")).toHaveCount(0);
    await page.getByTestId("pause-target").selectOption(TARGET);
    await page.getByTestId("pause-reason").fill("statement storm in the drill");
    await page.getByTestId("pause-submit").click();
    await expect(page.getByTestId("flash")).toContainText("requested");
    const row = page.locator(`tr[data-target="${TARGET}"]`);
    await expect(row).toHaveAttribute("data-status", "pending");
    // The requester is offered no approval of its own request, and nothing is paused yet.
    await expect(row.getByTestId("pause-approve")).toHaveCount(0);
    await expect(page.getByTestId("pause-banner")).toHaveCount(0);

    // --- a different approver approves -------------------------------------------------
    // The request reaches the open inbox first and the navigation's count, live, without a
    // reload (issue 41: "Pending 0" until one).
    await expect(ap.getByTestId("pending-pauses")).toBeVisible({ timeout: 2_000 });
    await expect.poll(() => navCount(ap), { timeout: 2_000 }).toBe(before + 1);
    await ap.getByTestId("pending-pauses").getByRole("link", { name: "Pauses page" }).click();
    await expect(ap.getByRole("heading", { name: "Emergency switch", level: 1 })).toBeVisible();
    const apRow = ap.locator(`tr[data-target="${TARGET}"]`);
    await apRow.getByTestId("pause-approve").click();
    await ap.getByTestId("pause-password").fill(approver.password);
    await ap.getByTestId("pause-step-reason").fill("agreed on the bridge call");
    await ap.getByTestId("pause-step-submit").click();
    await expect(ap.getByTestId("flash")).toContainText("now active");
    // The operator's open page shows the banner within about a second, untouched (issue 41).
    await expect(page.getByTestId("pause-banner")).toContainText(WHAT, { timeout: 1_500 });

    // --- the banner on every page, for both, and the gauge -------------------------------
    for (const [link, heading] of [
      ["Dashboard", "Dashboard"],
      ["Payments", "Payments"],
      ["Error pool", "Error pool"],
      ["Webhooks", "Webhooks"],
    ]) {
      await go(ap, link, heading);
      const banner = ap.getByTestId("pause-banner");
      await expect(banner).toContainText(WHAT);
      await expect(banner).toContainText("statement storm in the drill");
      await expect(banner).toContainText(approver.user);
    }
    await axeScan(ap, "pause-banner");
    await go(page, "Payments", "Payments");
    await expect(page.getByTestId("pause-banner")).toContainText(WHAT);
    await page.reload();
    await hydrated(page);
    await expect(page.getByTestId("pause-banner")).toContainText(WHAT);
    await expect.poll(() => gauge(page), { timeout: 20_000 }).toBe(`converge_pause_active{target="${TARGET}"} 1`);

    // --- the operator ends it with the password: too early, so it is a request -----------
    await page.getByTestId("pause-banner").getByRole("link", { name: "Manage pauses" }).click();
    await expect(page.getByRole("heading", { name: "Emergency switch", level: 1 })).toBeVisible();
    await expect(row).toHaveAttribute("data-status", "active");
    await row.getByTestId("pause-resume").click();
    // Without the password the form refuses before anything is sent.
    await page.getByTestId("pause-step-reason").fill("storm over");
    await page.getByTestId("pause-step-submit").click();
    await expect(page.getByTestId("pause-step-error")).toContainText("password");
    await page.getByTestId("pause-password").fill(operator.password);
    await page.getByTestId("pause-step-submit").click();
    await expect(page.getByTestId("flash")).toContainText("needs another person's approval");
    await expect(row).toHaveAttribute("data-status", "active");
    await expect(row.getByTestId("pause-end-request")).toContainText("storm over");
    await expect(page.getByTestId("pause-banner")).toContainText(WHAT);

    // --- the approver approves the early end with the password ---------------------------
    await go(ap, "Pauses", "Emergency switch");
    const apEnd = ap.locator(`tr[data-target="${TARGET}"]`);
    await expect(apEnd.getByTestId("pause-end-request")).toContainText(operator.user);
    await apEnd.getByTestId("pause-approve").click();
    await ap.getByTestId("pause-password").fill(approver.password);
    await ap.getByTestId("pause-step-reason").fill("agreed: storm over");
    await ap.getByTestId("pause-step-submit").click();
    await expect(ap.getByTestId("flash")).toContainText("now resumed");
    await expect(ap.getByTestId("ended-pauses")).toContainText("agreed: storm over");
    await go(page, "Dashboard", "Dashboard");
    await expect(page.getByTestId("pause-banner")).toHaveCount(0);
    await expect(ap.getByTestId("pause-banner")).toHaveCount(0, { timeout: 2_000 });
    await expect.poll(() => gauge(page), { timeout: 20_000 }).toBe(`converge_pause_active{target="${TARGET}"} 0`);
    expect(errors).toEqual([]);
  } finally {
    await resumePauses(
      TARGET,
      { page, password: operator.password },
      { page: ap, password: approver.password },
      "pause.spec.ts cleanup",
    );
    await approverContext.close();
  }
});
