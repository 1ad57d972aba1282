// A small benchmark harness: the latency of an RDMA Write through the promise API (time until `await qp.write()`
// resolves) and the bandwidth of Writes kept in flight, between two queue pairs of this process over loopback.
// Medians and the 99th percentile over many iterations, because one timing on a shared machine says little.
//
//   node examples/write-latency.mjs                       # sizes 8 B ... 64 KiB
//   node examples/write-latency.mjs --iterations 5000 --inflight 32
//
// `ndbench` (npx ndbench --help) is the full tool: perftest's tests and flags, two machines, TCP baselines, plots.
import { openAdapter, encodeRemote, decodeRemote } from 'netdirect';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const iterations = option('--iterations', 1000);
const inflight = option('--inflight', 16);
const sizes = [8, 64, 512, 4096, 65536];

const adapter = await openAdapter('127.0.0.1');
const listener = await adapter.listen({ port: 0 });
const target = await adapter.allocateMemory(Math.max(...sizes), { remoteWrite: true });
const server = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue() });
const accepted = listener
  .getConnectionRequest()
  .then((c) => c.accept(server, { privateData: encodeRemote(target.remote()) }));
const qp = adapter.createQueuePair({ receiveCq: adapter.createCompletionQueue() });
const remote = decodeRemote((await adapter.connect(qp, listener.address)).privateData);
await accepted;
const source = await adapter.allocateMemory(Math.max(...sizes));

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
console.log('bytes   median µs   p99 µs   MB/s (%d in flight)', inflight);
for (const size of sizes) {
  const local = source.slice(0, size);
  for (let i = 0; i < 100; i++) await qp.write(local, remote); // warm-up
  const times = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    await qp.write(local, remote);
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  times.sort((a, b) => a - b);

  const t0 = process.hrtime.bigint();
  let next = 0;
  const lane = async () => {
    while (next++ < iterations) await qp.write(local, remote);
  };
  await Promise.all(Array.from({ length: inflight }, lane));
  const mbps = (size * iterations) / (Number(process.hrtime.bigint() - t0) / 1000);
  console.log(`${String(size).padStart(5)}   ${percentile(times, 50).toFixed(1).padStart(9)}   ${percentile(times, 99).toFixed(1).padStart(6)}   ${mbps.toFixed(1).padStart(8)}`);
}
await adapter.close();
