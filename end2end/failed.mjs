// Prints the failed tests of a Playwright JSON report (argument 1), one block each: file, title,
// then the first lines of the error. scripts/test.sh runs it when the browser tests fail, after
// cargo-leptos's backtrace, so the end of the log names what failed.
import { readFileSync } from "node:fs";

const report = JSON.parse(readFileSync(process.argv[2], "utf8"));
const failed = [];
const walk = (suite, path) => {
  for (const spec of suite.specs ?? []) {
    for (const test of spec.tests ?? []) {
      for (const result of test.results ?? []) {
        if (result.status !== "passed" && result.status !== "skipped") {
          failed.push({ where: `${spec.file}:${spec.line}`, title: [...path, spec.title].join(" › "), result });
        }
      }
    }
  }
  for (const child of suite.suites ?? []) walk(child, suite.title && !suite.title.endsWith(".ts") ? [...path, suite.title] : path);
};
for (const suite of report.suites ?? []) walk(suite, []);
const stats = report.stats ?? {};
console.log(`browser tests: ${stats.expected ?? "?"} passed, ${stats.unexpected ?? "?"} failed, ${stats.flaky ?? 0} flaky, ${stats.skipped ?? 0} skipped`);
for (const { where, title, result } of failed) {
  console.log(`\nFAILED ${where} ${title} (${result.status}, ${result.duration} ms)`);
  const strip = (s) => s.replace(/\u001b\[[0-9;]*m/g, "");
  for (const e of result.errors ?? []) {
    console.log(strip(e.message ?? String(e)).split("\n").slice(0, 25).map((l) => `  ${l}`).join("\n"));
  }
}
