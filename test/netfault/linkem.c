// linkem: a two-port IP link emulator for the network-fault tier (test/netfault/README.md says why it exists).
//
// It creates one TUN device in each of two network namespaces and forwards every IP packet read from one device
// to the other, after applying faults: random loss, a delay with jitter, reordering (a packet that skips the
// delay and overtakes the ones queued before it, as netem's "reorder" does) and a cut (every packet dropped
// until the link is restored). Each namespace keeps its own kernel TCP/IP stack; only the packets between them
// pass through here.
//
//   linkem --ns-a /run/netns/A --dev-a nfa0 --ns-b /run/netns/B --dev-b nfb0
//
// The devices exist as soon as "ready" is printed on stdout; the caller addresses them (`ip -n A addr add ...`,
// `ip -n A link set nfa0 up`). Control: one command per line on stdin, answered with one line on stdout:
//   loss <percent>           drop each packet with this probability (both directions)
//   delay <ms> [jitter_ms]   one-way delay, uniform jitter of +-jitter_ms (clamped at 0)
//   reorder <percent>        this share of packets is sent at once, ahead of the delayed ones
//   cut | restore            drop everything / stop dropping
//   seed <n>                 restart the random sequence (runs are repeatable)
//   stats                    "stats forwarded=N lost=N reordered=N cut=N queued=N"
// End of stdin (the caller exited) ends linkem, and the devices go with it.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_PACKET 65536
#define MAX_QUEUED 20000  // beyond this, packets are dropped (netem's "limit")

struct packet {
  uint64_t due_ns;
  uint64_t order;  // tie-break: equal due times leave in arrival order
  int to;          // index of the device to write to
  size_t len;
  unsigned char data[];
};

static struct packet* heap[MAX_QUEUED];
static size_t heap_len;

static double loss_pct, reorder_pct, delay_ms, jitter_ms;
static int cut;
static uint64_t forwarded, lost, reordered, cut_dropped, overflow;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// xorshift64*: uniform in [0, 1)
static double uniform(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static int earlier(const struct packet* a, const struct packet* b) {
  return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->order < b->order);
}

static void heap_push(struct packet* p) {
  size_t i = heap_len++;
  heap[i] = p;
  while (i > 0 && earlier(heap[i], heap[(i - 1) / 2])) {
    struct packet* t = heap[i];
    heap[i] = heap[(i - 1) / 2];
    heap[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static struct packet* heap_pop(void) {
  struct packet* top = heap[0];
  heap[0] = heap[--heap_len];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < heap_len && earlier(heap[l], heap[m])) m = l;
    if (r < heap_len && earlier(heap[r], heap[m])) m = r;
    if (m == i) break;
    struct packet* t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
  return top;
}

static void die(const char* what) {
  fprintf(stderr, "linkem: %s: %s\n", what, strerror(errno));
  exit(1);
}

// Opens /dev/net/tun from inside `netns` (a TUN device belongs to the namespace its file was opened in) and
// creates device `name` there. Non-blocking, no packet-info header: read() returns one bare IP packet.
static int open_tun(const char* netns, const char* name) {
  int ns = open(netns, O_RDONLY | O_CLOEXEC);
  if (ns < 0) die(netns);
  if (setns(ns, CLONE_NEWNET) != 0) die("setns");
  close(ns);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("/dev/net/tun");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF");
  return fd;
}

static void admit(int to, const unsigned char* data, size_t len, uint64_t now) {
  static uint64_t order;
  if (cut) {
    cut_dropped++;
    return;
  }
  if (loss_pct > 0 && uniform() * 100.0 < loss_pct) {
    lost++;
    return;
  }
  if (heap_len == MAX_QUEUED) {
    overflow++;
    return;
  }
  double d = delay_ms;
  if (jitter_ms > 0) d += (uniform() * 2.0 - 1.0) * jitter_ms;
  if (reorder_pct > 0 && uniform() * 100.0 < reorder_pct) {
    d = 0;
    reordered++;
  }
  if (d < 0) d = 0;
  struct packet* p = malloc(sizeof *p + len);
  if (p == NULL) die("malloc");
  p->due_ns = now + (uint64_t)(d * 1e6);
  p->order = order++;
  p->to = to;
  p->len = len;
  memcpy(p->data, data, len);
  heap_push(p);
}

static void release_due(const int* fds, uint64_t now) {
  while (heap_len > 0 && heap[0]->due_ns <= now) {
    struct packet* p = heap_pop();
    // A full device queue drops the packet, as a real link would; TCP recovers it.
    if (!cut && write(fds[p->to], p->data, p->len) == (ssize_t)p->len) forwarded++;
    free(p);
  }
}

static void command(char* line) {
  char word[32];
  double a = 0, b = 0;
  int n = sscanf(line, "%31s %lf %lf", word, &a, &b);
  if (n < 1) return;
  if (strcmp(word, "loss") == 0 && n >= 2) {
    loss_pct = a;
  } else if (strcmp(word, "delay") == 0 && n >= 2) {
    delay_ms = a;
    jitter_ms = n >= 3 ? b : 0;
  } else if (strcmp(word, "reorder") == 0 && n >= 2) {
    reorder_pct = a;
  } else if (strcmp(word, "cut") == 0) {
    cut = 1;
  } else if (strcmp(word, "restore") == 0) {
    cut = 0;
  } else if (strcmp(word, "seed") == 0 && n >= 2) {
    rng_state = (uint64_t)a * 0x9e3779b97f4a7c15ull + 1;
  } else if (strcmp(word, "stats") == 0) {
    printf("stats forwarded=%llu lost=%llu reordered=%llu cut=%llu overflow=%llu queued=%zu\n",
           (unsigned long long)forwarded, (unsigned long long)lost, (unsigned long long)reordered,
           (unsigned long long)cut_dropped, (unsigned long long)overflow, heap_len);
    fflush(stdout);
    return;
  } else {
    printf("error unknown command: %s", line);
    fflush(stdout);
    return;
  }
  printf("ok %s\n", word);
  fflush(stdout);
}

// Reads what stdin has; runs every complete line. Returns 0 at end of input.
static int read_commands(void) {
  static char buf[4096];
  static size_t have;
  ssize_t n = read(0, buf + have, sizeof buf - 1 - have);
  if (n == 0) return 0;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  have += (size_t)n;
  buf[have] = '\0';
  char* start = buf;
  char* nl;
  while ((nl = strchr(start, '\n')) != NULL) {
    *nl = '\0';
    command(start);
    start = nl + 1;
  }
  have = (size_t)(buf + have - start);
  memmove(buf, start, have);
  if (have == sizeof buf - 1) have = 0;  // an overlong line: dropped
  return 1;
}

static const char* arg(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  fprintf(stderr, "linkem: missing %s (usage: linkem --ns-a PATH --dev-a NAME --ns-b PATH --dev-b NAME)\n", name);
  exit(2);
}

int main(int argc, char** argv) {
  int fds[2];
  fds[0] = open_tun(arg(argc, argv, "--ns-a"), arg(argc, argv, "--dev-a"));
  fds[1] = open_tun(arg(argc, argv, "--ns-b"), arg(argc, argv, "--dev-b"));
  printf("ready\n");
  fflush(stdout);

  static unsigned char buf[MAX_PACKET];
  struct pollfd pfd[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {0, POLLIN, 0}};
  for (;;) {
    int timeout = -1;
    if (heap_len > 0) {
      uint64_t now = now_ns();
      timeout = heap[0]->due_ns <= now ? 0 : (int)((heap[0]->due_ns - now + 999999) / 1000000);
    }
    if (poll(pfd, 3, timeout) < 0 && errno != EINTR) die("poll");
    uint64_t now = now_ns();
    for (int side = 0; side < 2; side++) {
      if (!(pfd[side].revents & POLLIN)) continue;
      for (int burst = 0; burst < 256; burst++) {
        ssize_t n = read(fds[side], buf, sizeof buf);
        if (n <= 0) break;
        admit(1 - side, buf, (size_t)n, now);
      }
    }
    if (pfd[2].revents & (POLLIN | POLLHUP)) {
      if (!read_commands()) return 0;
    }
    release_due(fds, now_ns());
  }
}
