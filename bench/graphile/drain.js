// graphile-worker no-op drain (issue "Proof", benchmark 4): the peer a team would otherwise
// pick. Usage: node drain.js POSTGRES_URL JOBS CONCURRENCY LABEL
// Migrates graphile-worker's schema into the (fresh) database, adds JOBS `noop` jobs in one
// statement (not measured), then runs one worker process with CONCURRENCY and times from the
// start of `run()` until the last job succeeded. Prints `LABEL.jobs=` and `LABEL.jobs_per_s=`.
"use strict";
const { run, makeWorkerUtils, Logger } = require("graphile-worker");

async function main() {
  const [connectionString, jobsArg, concArg, label = "graphile"] = process.argv.slice(2);
  const jobs = Number(jobsArg);
  const concurrency = Number(concArg);
  if (!connectionString || !(jobs > 0) || !(concurrency > 0)) {
    throw new Error("usage: node drain.js POSTGRES_URL JOBS CONCURRENCY [LABEL]");
  }
  const logger = new Logger(() => () => {});
  const utils = await makeWorkerUtils({ connectionString, logger });
  await utils.migrate();
  await utils.withPgClient((c) =>
    c.query("select graphile_worker.add_job('noop', json_build_object('i', g)) from generate_series(1, $1) g", [jobs]),
  );
  await utils.release();

  let done = 0;
  let finish;
  const finished = new Promise((resolve) => (finish = resolve));
  const started = process.hrtime.bigint();
  const runner = await run({
    connectionString,
    concurrency,
    maxPoolSize: concurrency + 2,
    noHandleSignals: true,
    pollInterval: 1000,
    logger,
    taskList: { noop: async () => {} },
  });
  runner.events.on("job:success", () => {
    done += 1;
    if (done === jobs) finish();
  });
  await finished;
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  await runner.stop();
  console.log(`${label}.jobs=${jobs}`);
  console.log(`${label}.concurrency=${concurrency}`);
  console.log(`${label}.jobs_per_s=${Math.round(jobs / secs)}`);
}

main().catch((e) => {
  console.error(`graphile drain: ${e.message}`);
  process.exit(1);
});
