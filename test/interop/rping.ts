// rping's data pattern (rdma-core librdmacm/examples/rping.c protocol, docs/iwarp.md §5), shared by the tests.

/** rping's buffer for ping n (docs/iwarp.md §5), as the server prints it with -v. */
export function rpingText(ping: number, size: number): string {
  let s = `rdma-ping-${ping}: `;
  let c = 65 + (ping % 58);
  while (s.length < size - 1) {
    s += String.fromCharCode(c);
    if (++c > 122) c = 65;
  }
  return s.slice(0, size - 1);
}
