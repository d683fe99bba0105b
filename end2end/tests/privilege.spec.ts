// The two-person rule on privilege (issue 36, "No one moves money alone"): admin A asks for a
// role grant on the Users page, which becomes a request; A cannot approve it; admin B approves
// it on the Approvals page with their password, and only then does the grant take effect.
// Both admins are made by scripts/test.sh with the command line (the bootstrap stays one step).
import { expect, test } from "@playwright/test";
import { approvePrivilege, env, hydrated, open, pageErrors, signInAs, unique } from "./support";

test("a role grant asked by one admin takes effect only when another approves it with step-up", async ({ page, browser }) => {
  const errors = pageErrors(page);
  await signInAs(page, "E2E_PRIV_A");
  await open(page, "/admin/users");

  // A viewer account is one step.
  const name = unique("grantee");
  const form = page.getByTestId("add-user");
  await form.getByLabel("Username").fill(name);
  await form.getByLabel("Password").fill("a-fresh-password-42");
  await form.getByRole("button", { name: "Add user" }).click();
  await expect(page.getByTestId("flash")).toContainText(`User ${name} added`);

  // Granting approver is a request: the page says it waits, and the roles are unchanged.
  const row = page.getByTestId(`user-${name}`);
  await row.getByRole("button", { name: "Edit roles…" }).click();
  await row.getByTestId("roles-form").getByLabel("approver").check();
  await row.getByTestId("roles-save").click();
  await expect(page.getByTestId("flash")).toContainText("awaits another admin");
  await expect(row.getByTestId("roles")).toHaveText("viewer");

  // A cannot decide their own request.
  await open(page, "/approvals");
  const mine = page.getByTestId("privilege-pending").getByRole("row").filter({ hasText: `set the roles of ${name}` });
  await expect(mine).toHaveCount(1);
  await expect(mine.getByTestId("privilege-own")).toBeVisible();
  await expect(mine.getByTestId("privilege-approve")).toHaveCount(0);

  // B approves; a wrong password first is refused, and nothing changes.
  const other = await browser.newContext();
  const b = await other.newPage();
  await signInAs(b, "E2E_PRIV_B");
  await open(b, "/approvals");
  const pending = b.getByTestId("privilege-pending").getByRole("row").filter({ hasText: `set the roles of ${name}` });
  await pending.getByTestId("privilege-approve").click();
  await pending.getByTestId("privilege-password").fill("not-the-right-password");
  await pending.getByTestId("privilege-reason").fill("checked with the requester");
  await pending.getByTestId("privilege-submit").click();
  await expect(pending.getByTestId("privilege-error")).toContainText("not approved");
  await approvePrivilege(b, `set the roles of ${name}`, env("E2E_PRIV_B_PASSWORD"));
  await expect(b.getByTestId("privilege-decided").getByRole("row").filter({ hasText: `set the roles of ${name}` })).toContainText("executed");
  await other.close();

  // The grant took effect.
  await open(page, "/admin/users");
  await hydrated(page);
  await expect(page.getByTestId(`user-${name}`).getByTestId("roles")).toHaveText("viewer, approver");
  expect(errors).toEqual([]);
});
