// Passkeys for step-up (issue 36) in Chromium with its virtual authenticator (Chrome DevTools
// Protocol, WebAuthn domain): an approver registers a passkey on the Approvals page ("Your
// passkeys", its password again), then approves an operator's reversal with "Approve with
// passkey" instead of the password. A wrong key under the registered credential id, a clone
// whose signature counter went back, and a removed passkey are refused.
//
// WebAuthn needs a secure context and a relying party id that is a host name, never an IP
// address: the approver's pages are opened on http://localhost:<port> (the server's default
// --webauthn-origin is http://localhost:<port of --bind>). The operator and the approver are
// made by scripts/test.sh (E2E_PASSKEY_OPERATOR_*, E2E_PASSKEY_APPROVER_*), so no other test's
// user carries a passkey.
import * as crypto from "node:crypto";
import { CDPSession, expect, Page, test } from "@playwright/test";
import { createPayment, env, hydrated, pageErrors, unique } from "./support";

test.describe.configure({ mode: "serial" });

/** `path` on the test server, addressed as localhost (the relying party's host). */
function onLocalhost(path: string): string {
  const base = new URL(process.env.CONVERGE_E2E_URL ?? "http://127.0.0.1:3000");
  base.hostname = "localhost";
  return new URL(path, base).toString();
}

/** Signs in on localhost as the user of the `<prefix>_USER` / `<prefix>_PASSWORD` variables. */
async function signInOnLocalhost(page: Page, prefix: string): Promise<void> {
  const username = env(`${prefix}_USER`);
  await page.goto(onLocalhost("/login"));
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(env(`${prefix}_PASSWORD`));
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("current-user")).toHaveText(username);
  await hydrated(page);
}

/** A CTAP2 platform authenticator with user verification, in `page`'s browser context. */
async function virtualAuthenticator(page: Page): Promise<{ cdp: CDPSession; authenticatorId: string }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { cdp, authenticatorId };
}

type VirtualCredential = {
  credentialId: string;
  isResidentCredential: boolean;
  rpId?: string;
  privateKey: string;
  userHandle?: string;
  signCount: number;
};

/** The authenticator's one credential. */
async function onlyCredential(cdp: CDPSession, authenticatorId: string): Promise<VirtualCredential> {
  const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
  expect(credentials).toHaveLength(1);
  return credentials[0] as VirtualCredential;
}

/** Replaces the authenticator's credential with `changed` (same id, other key or counter). */
async function replaceCredential(
  cdp: CDPSession,
  authenticatorId: string,
  old: VirtualCredential,
  changed: Partial<VirtualCredential>,
): Promise<void> {
  await cdp.send("WebAuthn.removeCredential", { authenticatorId, credentialId: old.credentialId });
  await cdp.send("WebAuthn.addCredential", { authenticatorId, credential: { ...old, ...changed } });
}

/** A reversal request by the passkey operator on a fresh SUCCESS payment; its payment id. */
async function reversalRequest(operator: Page, request: import("@playwright/test").APIRequestContext): Promise<string> {
  const shop = env("E2E_MERCHANT_KEY");
  const payment = await createPayment(
    request,
    shop,
    { amount: 2700, currency: "CNY", merchant_order_id: unique("passkey") },
    unique("idem"),
  );
  await expect
    .poll(
      async () => (await (await request.get(`/v1/payments/${payment.id}`, { headers: { Authorization: `Bearer ${shop}` } })).json()).status,
      { timeout: 20_000, intervals: [250] },
    )
    .toBe("SUCCESS");
  const asked = await operator.request.post(onLocalhost("/ops/v1/actions"), {
    headers: { Origin: new URL(onLocalhost("/")).origin },
    data: { kind: "reverse", payment_id: payment.id, reason: `passkey test (${unique("ticket")})` },
  });
  expect(asked.status(), await asked.text()).toBe(201);
  return payment.id;
}

/** Opens the approval form of the pending request on `paymentId` and gives a reason. */
async function openApproval(approver: Page, paymentId: string) {
  await approver.goto(onLocalhost("/approvals"));
  await hydrated(approver);
  const row = approver.getByTestId("pending").getByRole("row").filter({ hasText: paymentId });
  await expect(row).toHaveCount(1);
  await row.getByTestId("approve").click();
  const form = approver.getByTestId("decision-form");
  await form.getByLabel("Reason").fill("checked the dispute");
  return form;
}

let approver: Page;
let operator: Page;
let authenticator: { cdp: CDPSession; authenticatorId: string };

test.beforeAll(async ({ browser }) => {
  operator = await (await browser.newContext()).newPage();
  await signInOnLocalhost(operator, "E2E_PASSKEY_OPERATOR");
  approver = await (await browser.newContext()).newPage();
  authenticator = await virtualAuthenticator(approver);
  await signInOnLocalhost(approver, "E2E_PASSKEY_APPROVER");
});

test("an approver registers a passkey and approves a reversal with it", async ({ request }) => {
  const errors = pageErrors(approver);
  await approver.goto(onLocalhost("/approvals"));
  await hydrated(approver);
  const panel = approver.getByTestId("passkey-form");
  // A wrong password registers nothing.
  await panel.getByLabel("Passkey name").fill("virtual authenticator");
  await panel.getByLabel("Your password").fill("not-the-approvers-password");
  await panel.getByTestId("passkey-register").click();
  await expect(approver.getByTestId("passkey-error")).toContainText("re-enter your own password");
  await expect(approver.getByTestId("passkey-row")).toHaveCount(0);
  // The authenticator made its key before the server refused: an orphan nobody can use.
  await authenticator.cdp.send("WebAuthn.clearCredentials", { authenticatorId: authenticator.authenticatorId });
  // With the password: the browser's passkey prompt (answered by the virtual authenticator).
  await panel.getByLabel("Passkey name").fill("virtual authenticator");
  await panel.getByLabel("Your password").fill(env("E2E_PASSKEY_APPROVER_PASSWORD"));
  await panel.getByTestId("passkey-register").click();
  await expect(approver.getByTestId("passkey-outcome")).toContainText("registered");
  await expect(approver.getByTestId("passkey-row")).toHaveCount(1);
  await expect(approver.getByTestId("passkey-row")).toContainText("virtual authenticator");
  const registered = await onlyCredential(authenticator.cdp, authenticator.authenticatorId);
  expect(registered.rpId).toBe("localhost");

  const paymentId = await reversalRequest(operator, request);
  const form = await openApproval(approver, paymentId);
  await form.getByTestId("approve-passkey").click();
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  const used = await onlyCredential(authenticator.cdp, authenticator.authenticatorId);
  expect(used.signCount).toBeGreaterThan(registered.signCount);
  expect(errors).toEqual([]);
});

test("a wrong key, a cloned credential and a removed passkey are refused", async ({ request }) => {
  const errors = pageErrors(approver);
  const { cdp, authenticatorId } = authenticator;
  const genuine = await onlyCredential(cdp, authenticatorId);
  const paymentId = await reversalRequest(operator, request);

  // Another private key under the registered credential id: its signature does not verify.
  const { privateKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  const otherKey = privateKey.export({ format: "der", type: "pkcs8" }).toString("base64");
  await replaceCredential(cdp, authenticatorId, genuine, { privateKey: otherKey, signCount: genuine.signCount + 10 });
  let form = await openApproval(approver, paymentId);
  await form.getByTestId("approve-passkey").click();
  await expect(form.getByTestId("decision-error")).toContainText("not approved");

  // A clone of the genuine key whose counter is behind the last one the server accepted.
  await replaceCredential(cdp, authenticatorId, await onlyCredential(cdp, authenticatorId), {
    privateKey: genuine.privateKey,
    signCount: 0,
  });
  form = await openApproval(approver, paymentId);
  await form.getByTestId("approve-passkey").click();
  await expect(form.getByTestId("decision-error")).toContainText("not approved");
  // Still pending: nothing was approved by the wrong key or the clone.
  await approver.goto(onLocalhost("/approvals"));
  await hydrated(approver);
  await expect(approver.getByTestId("pending").getByRole("row").filter({ hasText: paymentId })).toHaveCount(1);

  // Removed from the account: the passkey no longer approves, whatever the authenticator holds.
  await replaceCredential(cdp, authenticatorId, await onlyCredential(cdp, authenticatorId), {
    privateKey: genuine.privateKey,
    signCount: genuine.signCount + 100,
  });
  await approver.getByTestId("passkey-row").getByTestId("passkey-remove").click();
  await expect(approver.getByTestId("passkey-outcome")).toContainText("removed");
  await expect(approver.getByTestId("passkey-row")).toHaveCount(0);
  form = await openApproval(approver, paymentId);
  await form.getByTestId("approve-passkey").click();
  await expect(form.getByTestId("decision-error")).toContainText("no passkey");

  // The password still approves (passkeys are not required on this server).
  await form.getByLabel("Your password").fill(env("E2E_PASSKEY_APPROVER_PASSWORD"));
  await form.getByTestId("decision-submit").click();
  await expect(approver.getByTestId("flash")).toContainText("approved: now executed");
  expect(errors).toEqual([]);
});
