// A ring of N ranks with the job API: every rank RDMA-Writes a block into the next rank's window, and the next
// rank checks it once the notification says it landed. Launch it with any launcher join() knows:
//   mpiexec -n 4 node examples/ring-job.mjs                       (MPICH / Intel MPI: PMI over PMI_FD)
//   srun --mpi=pmi2 -n 4 node examples/ring-job.mjs               (Slurm: PMI-2 over PMI_FD)
//   NETDIRECT_RENDEZVOUS=node0:29500 mpirun -x NETDIRECT_RENDEZVOUS -x NETDIRECT_JOB_SECRET -n 4 node examples/ring-job.mjs
//   NETDIRECT_JOB_SECRET=<the same on every rank: netdirect job-secret> NETDIRECT_RENDEZVOUS=127.0.0.1:29500 \
//     NETDIRECT_SIZE=4 NETDIRECT_RANK=<r> node examples/ring-job.mjs
import { join } from 'netdirect/job';

const block = Number(process.env.BLOCK ?? 4096);
const pattern = (rank, i) => (rank * 31 + i) & 0xff;

const job = await join();
const { rank, size } = job;
const [prev, next] = [(rank + size - 1) % size, (rank + 1) % size];

const window = await job.allocateWindow(block); // registered on every rank, tokens exchanged
const mine = Uint8Array.from({ length: block }, (_, i) => pattern(rank, i));
await window.put(next, 0, mine, { notify: true }); // an RDMA Write, then "it landed" to rank next
await window.waitNotifications(prev, 1); // rank prev's block is in window.buffer now

const bad = window.buffer.findIndex((b, i) => b !== pattern(prev, i));
const ok = await job.allreduce(new Int32Array([bad < 0 ? 1 : 0]), 'min'); // every rank agrees
console.log(`rank ${rank}/${size} (${job.launcher}): block from rank ${prev} ${bad < 0 ? 'intact' : `wrong from byte ${bad}`}`);
if (rank === 0) console.log(ok[0] === 1 ? `ring of ${size} ranks: every block arrived intact` : 'ring failed');

await window.free();
await job.close();
process.exitCode = ok[0] === 1 ? 0 : 1;
