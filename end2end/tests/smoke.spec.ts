import { expect, test } from "@playwright/test";

test("login page is server-rendered, then hydrated so its handlers run", async ({ page }) => {
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));

  const response = await page.goto("/login");
  expect(response?.status()).toBe(200);
  // Server-rendered: the form is in the HTML before any script runs.
  await expect(page.getByRole("heading", { name: "Sign in" })).toBeVisible();

  // Hydrated: the effect that only runs in the browser flips the marker.
  await expect(page.locator("main.login")).toHaveAttribute("data-hydrated", "true");

  // A click handler runs only after hydration: submitting empty fields shows the hint.
  await page.getByTestId("sign-in").click();
  await expect(page.getByTestId("form-message")).toHaveText("Enter your username and password.");

  // The sign-in page tells nobody which database runs behind it.
  await expect(page.locator("main.login")).not.toContainText(/sqlite|postgres|database/i);
  await expect(page.getByTestId("db-status")).toHaveCount(0);
  expect(errors).toEqual([]);
});

test("health and metrics answer next to the console", async ({ request }) => {
  const health = await request.get("/health");
  expect(health.status()).toBe(200);
  expect((await health.json()).database.reachable).toBe(true);
  const metrics = await request.get("/metrics");
  expect(metrics.status()).toBe(200);
});
