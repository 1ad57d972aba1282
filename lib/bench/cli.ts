#!/usr/bin/env node
// The `ndbench` command (perftest-style RDMA benchmarks over netdirect; see USAGE in options.ts).
import { main } from './main.js';

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`ndbench: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
