#!/usr/bin/env node
'use strict';
// Empty cq.poll() in a loop (manual mode, no QP): what one spin-loop poll costs in native instructions.
//   valgrind --tool=callgrind --toggle-collect='*CompletionQueue::Poll*' node scripts/perf/poll_loop.js 100000
const path = require('node:path');
const nd = require(path.join(process.env.NDPERF_ROOT || path.join(__dirname, '..', '..'), 'dist', 'cjs', 'index.js'));
(async () => {
  const n = Number(process.argv[2] || 100000);
  const adapter = await nd.openAdapter('127.0.0.1', { completion: 'manual' });
  const cq = adapter.createCompletionQueue({ depth: 64 });
  let got = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) got += cq.poll().length;
  const ns = Number(process.hrtime.bigint() - t0) / n;
  console.log(JSON.stringify({ polls: n, nsPerPoll: +ns.toFixed(1), got }));
  await adapter.close();
})();
