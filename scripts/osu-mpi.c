/*
 * The MPI side of `ndbench osu_* --compare mpi` (lib/bench/osu.ts; docs/ndbench.md). ndbench compiles this file
 * with mpicc at run time and starts it with mpiexec, with the same ranks, sizes and counts as its own run over
 * netdirect/job, so the two figures of a row come from one command. It measures the OSU Micro-Benchmarks'
 * patterns with plain MPI calls (written for ndbench, not taken from OSU):
 *
 *   osu_latency     ping-pong of MPI_Send/MPI_Recv between ranks 0 and 1: half the round trip
 *   osu_multi_lat   the same between every pair (rank r and r + n/2), averaged over the pairs
 *   osu_bw          rank 0 posts a window of MPI_Isend, rank 1 the matching MPI_Irecv, then a 4-byte reply
 *   osu_mbw_mr      the same from every rank of the first half to its partner, summed over the pairs
 *   osu_bibw        both ranks send a window to each other at once, then wait for both
 *   osu_put_latency MPI_Put of <size> bytes into rank 1's window, then MPI_Win_flush (passive target, one lock)
 *   osu_put_bw      a window of MPI_Put, then MPI_Win_flush
 *   osu_get_bw      a window of MPI_Get, then MPI_Win_flush
 *   osu_barrier     MPI_Barrier
 *   osu_bcast       MPI_Bcast of <size> bytes from rank 0
 *   osu_allreduce   MPI_Allreduce of <size>/4 floats, sum
 *   osu_alltoall    MPI_Alltoall of <size> bytes per pair of ranks
 *
 * usage: osu-mpi <test> <min size> <max size> <iterations> <iterations above 8 KiB> <warm-up> <warm-up above 8 KiB> <window>
 * Rank 0 prints the MPI library's version ("# ..."), then one line per size: "<size> <avg> <min> <max> <iterations>",
 * figures in microseconds (MB/s, 10^6 bytes, for the bandwidth tests); avg is over the ranks that measure (summed
 * for the bandwidth of several pairs), min/max the extremes of their own figures.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE 8192

static int rank, size;

struct params {
  const char *test;
  long min, max;
  int iters, iters_large, warmup, warmup_large, window;
};

static int iters_for(const struct params *p, long bytes) { return bytes > LARGE ? p->iters_large : p->iters; }
static int warmup_for(const struct params *p, long bytes) { return bytes > LARGE ? p->warmup_large : p->warmup; }

static void *alloc_or_die(size_t bytes) {
  void *b = malloc(bytes ? bytes : 1);
  if (b == NULL) {
    fprintf(stderr, "osu-mpi: out of memory (%zu bytes)\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(b, rank + 1, bytes);
  return b;
}

/* The pairs: rank r of the first half with r + n/2. */
static int peer_of(void) { return rank < size / 2 ? rank + size / 2 : rank - size / 2; }
static int first_half(void) { return rank < size / 2; }

/* Half a round trip of a blocking ping-pong with this rank's partner, microseconds. */
static double latency(char *buf, long bytes, int n, int warm) {
  int peer = peer_of();
  double t0 = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < n + warm; i++) {
    if (i == warm) t0 = MPI_Wtime();
    if (first_half()) {
      MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - t0) * 1e6 / (2.0 * n);
}

/* A window of non-blocking transfers per iteration to this rank's partner (one way, or both ways at once): this
 * rank's MB/s (10^6 bytes) sent, 0 for a rank that only receives. */
static double bandwidth(char *sbuf, char *rbuf, long bytes, int n, int warm, int window, int both) {
  MPI_Request *req = alloc_or_die(sizeof(MPI_Request) * 2 * (size_t)window);
  MPI_Status *status = alloc_or_die(sizeof(MPI_Status) * 2 * (size_t)window);
  int peer = peer_of(), sends = both || first_half(), receives = both || !first_half();
  char ack[4] = {0};
  double t0 = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < n + warm; i++) {
    if (i == warm) t0 = MPI_Wtime();
    int k = 0;
    if (receives)
      for (int w = 0; w < window; w++) MPI_Irecv(rbuf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[k++]);
    if (sends)
      for (int w = 0; w < window; w++) MPI_Isend(sbuf, (int)bytes, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[k++]);
    MPI_Waitall(k, req, status);
    if (!both) {
      if (sends) MPI_Recv(ack, 4, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else MPI_Send(ack, 4, MPI_CHAR, peer, 3, MPI_COMM_WORLD);
    }
  }
  double elapsed = MPI_Wtime() - t0;
  free(req);
  free(status);
  return sends ? (double)bytes * window * n / elapsed / 1e6 : 0;
}

/* One-sided from rank 0 into rank 1's window under one passive-target lock: puts (or gets) then MPI_Win_flush.
 * Rank 0's microseconds per put (osu_put_latency) or MB/s; 0 on rank 1. */
static double one_sided(const struct params *p, char *buf, long bytes, int n, int warm) {
  MPI_Win win;
  char *base;
  MPI_Win_allocate(bytes ? bytes : 1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  int latency = strcmp(p->test, "osu_put_latency") == 0, get = strcmp(p->test, "osu_get_bw") == 0;
  int burst = latency ? 1 : p->window;
  double t0 = 0, elapsed = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    for (int i = 0; i < n + warm; i++) {
      if (i == warm) t0 = MPI_Wtime();
      for (int w = 0; w < burst; w++) {
        if (get) MPI_Get(buf, (int)bytes, MPI_CHAR, 1, 0, (int)bytes, MPI_CHAR, win);
        else MPI_Put(buf, (int)bytes, MPI_CHAR, 1, 0, (int)bytes, MPI_CHAR, win);
      }
      MPI_Win_flush(1, win);
    }
    elapsed = MPI_Wtime() - t0;
    MPI_Win_unlock(1, win);
  }
  MPI_Win_free(&win); /* collective: rank 1 waits here while rank 0 works */
  if (rank != 0) return 0;
  return latency ? elapsed * 1e6 / n : (double)bytes * burst * n / elapsed / 1e6;
}

/* This rank's average time of one collective call, microseconds. */
static double collective(const struct params *p, char *sbuf, char *rbuf, long bytes, int n, int warm) {
  double t0 = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < n + warm; i++) {
    if (i == warm) t0 = MPI_Wtime();
    if (strcmp(p->test, "osu_barrier") == 0) MPI_Barrier(MPI_COMM_WORLD);
    else if (strcmp(p->test, "osu_bcast") == 0) MPI_Bcast(sbuf, (int)bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
    else if (strcmp(p->test, "osu_allreduce") == 0) MPI_Allreduce(sbuf, rbuf, (int)(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else MPI_Alltoall(sbuf, (int)bytes, MPI_CHAR, rbuf, (int)bytes, MPI_CHAR, MPI_COMM_WORLD);
  }
  return (MPI_Wtime() - t0) * 1e6 / n;
}

/* Rank 0's line for one size from every rank's own figure (0: this rank measured nothing). */
static void report(long bytes, double mine, int sum_them, int n) {
  double lo_in = mine > 0 ? mine : 1e300, sum, lo, hi, counted, one = mine > 0 ? 1 : 0;
  MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&one, &counted, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&lo_in, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%ld %.3f %.3f %.3f %d\n", bytes, sum_them ? sum : sum / (counted > 0 ? counted : 1), counted > 0 ? lo : 0, hi, n);
}

static void one_size(const struct params *p, long bytes, char *sbuf, char *rbuf) {
  int n = iters_for(p, bytes), warm = warmup_for(p, bytes);
  const char *t = p->test;
  if (strcmp(t, "osu_latency") == 0 || strcmp(t, "osu_multi_lat") == 0) report(bytes, latency(sbuf, bytes, n, warm), 0, n);
  else if (strcmp(t, "osu_bw") == 0 || strcmp(t, "osu_mbw_mr") == 0) report(bytes, bandwidth(sbuf, rbuf, bytes, n, warm, p->window, 0), 1, n);
  else if (strcmp(t, "osu_bibw") == 0) report(bytes, bandwidth(sbuf, rbuf, bytes, n, warm, p->window, 1), 1, n);
  else if (strncmp(t, "osu_put_", 8) == 0 || strcmp(t, "osu_get_bw") == 0) report(bytes, one_sided(p, sbuf, bytes, n, warm), 0, n);
  else report(bytes, collective(p, sbuf, rbuf, bytes, n, warm), 0, n);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 9) {
    if (rank == 0) fprintf(stderr, "usage: osu-mpi <test> <min> <max> <iters> <iters-large> <warm-up> <warm-up-large> <window>\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  struct params p = {argv[1], atol(argv[2]), atol(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), atoi(argv[8])};
  int two = strcmp(p.test, "osu_latency") == 0 || strcmp(p.test, "osu_bw") == 0 || strcmp(p.test, "osu_bibw") == 0 ||
            strncmp(p.test, "osu_put_", 8) == 0 || strcmp(p.test, "osu_get_bw") == 0;
  int pairs = strcmp(p.test, "osu_mbw_mr") == 0 || strcmp(p.test, "osu_multi_lat") == 0;
  if (size < 2 || (two && size != 2) || (pairs && size % 2 != 0)) {
    if (rank == 0) fprintf(stderr, "osu-mpi: %s needs %s ranks, got %d\n", p.test, two ? "exactly 2" : pairs ? "an even number of" : "at least 2", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    version[strcspn(version, "\n")] = 0;
    printf("# %s\n", version);
  }
  long per = strcmp(p.test, "osu_alltoall") == 0 ? p.max * size : p.max;
  char *sbuf = alloc_or_die((size_t)per), *rbuf = alloc_or_die((size_t)per);
  if (strcmp(p.test, "osu_barrier") == 0) one_size(&p, 0, sbuf, rbuf);
  else
    for (long bytes = p.min; bytes <= p.max; bytes = bytes ? bytes * 2 : 1) one_size(&p, bytes, sbuf, rbuf);
  /* Every figure is out: ndbench may end a job whose MPI_Finalize does not return (lib/bench/osu.ts, runMpi). */
  if (rank == 0) printf("# done\n");
  fflush(stdout);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
