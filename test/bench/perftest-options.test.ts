// ndbench reads perftest's and OSU's flags as their users type them (no addon, no I/O): each flag with a meaning
// here is mapped, each one that selects something ND v2 / iWARP does not have is accepted with a note saying why
// or refused with the reason; glued values as getopt reads them. docs/ndbench.md has the table this checks.
import { describe, expect, it } from 'vitest';
import { UsageError, expandShort, parseArgs, warmupOf, type BenchOptions } from '../../lib/bench/options';

const parse = (...argv: string[]) => parseArgs(argv, {}) as BenchOptions;
const refused = (argv: string[], reason: RegExp) => {
  expect(() => parseArgs(argv, {})).toThrow(UsageError);
  expect(() => parseArgs(argv, {})).toThrow(reason);
};

describe('glued values (getopt)', () => {
  it('-s4096, --size=4096 and -s 4096 are the same; -bF is -b -F', () => {
    expect(parse('write_bw', '-s4096').sizes).toEqual([4096]);
    expect(parse('write_bw', '--size=4096').sizes).toEqual([4096]);
    expect(parse('write_bw', '-n77', '-t16', '-p9000', '-q2')).toMatchObject({ iters: 77, txDepth: 16, port: 9000, qps: 2 });
    expect(parse('write_bw', '-bFN')).toMatchObject({ bidirectional: true, noPeak: true });
    expect(expandShort(['-s4096', '-bF', '--size=8', 'host', '-'])).toEqual(['-s', '4096', '-b', '-F', '--size=8', 'host', '-']);
  });
  it('an unknown flag, glued or not, is still an error', () => {
    refused(['write_lat', '-k'], /unknown option -k/);
    refused(['write_lat', '-bk'], /unknown option -bk/);
    refused(['write_lat', '--frobnicate=1'], /unknown option --frobnicate/);
  });
});

describe('perftest flags with a meaning here', () => {
  it('-b: bidirectional, *_bw only; not with send_bw and manual polling, nor with -q > 1', () => {
    expect(parse('write_bw', '-b').bidirectional).toBe(true);
    expect(parse('read_bw', '--bidirectional').bidirectional).toBe(true);
    expect(parse('write_bw').bidirectional).toBe(false);
    refused(['write_lat', '-b'], /\*_bw tests/);
    refused(['send_bw', '-b', '--completion', 'manual'], /take each other's completions/);
    refused(['write_bw', '-b', '-q', '4'], /-q 1/);
    refused(['write_bw', '-b', '--compare', 'tcp'], /baselines stream one way/);
  });
  it('-H / -U: latency samples (sorted / unsorted), latency tests only', () => {
    expect(parse('write_lat', '-H')).toMatchObject({ histogram: true, unsorted: false });
    expect(parse('read_lat', '-U')).toMatchObject({ histogram: false, unsorted: true });
    expect(parse('send_lat', '--report-histogram', '--report-unsorted')).toMatchObject({ histogram: true, unsorted: true });
    refused(['write_bw', '-H'], /\*_lat tests/);
  });
  it('-N, -I, -r, -Q, --cpu_util', () => {
    expect(parse('write_bw', '-N', '-I', '64', '-r', '512', '-Q', '4', '--cpu_util')).toMatchObject({
      noPeak: true, inline: 64, rxDepth: 512, cqModeration: 4, cpuUtil: true,
    });
    expect(parse('send_bw', '--inline_size=128', '--rx-depth=64', '--cq-mod=8')).toMatchObject({ inline: 128, rxDepth: 64, cqModeration: 8 });
    expect(parse('write_bw').inline).toBe(0);
    refused(['write_bw', '-Q', '0'], /-Q must be in 1\.\./);
    expect(parse('write_bw', '-Q', '4').notes[0]).toMatch(/-Q applies with --completion manual/);
    expect(parse('write_bw', '-Q', '4', '--completion', 'manual').notes).toEqual([]);
  });
  it('-e: completions by notification (auto), never with --completion manual', () => {
    expect(parse('send_lat', '-e').completion).toBe('auto');
    expect(parse('send_lat', '-e', '--completion', 'thread').completion).toBe('thread');
    refused(['send_lat', '-e', '--completion', 'manual'], /contradicts --completion manual/);
  });
  it('-d: a provider name or DLL, or the adapter\'s local address; a Linux ibv device name is refused with why', () => {
    expect(parse('write_lat', '-d', 'soft').provider).toBe('soft');
    expect(parse('write_lat', '-dsoft').provider).toBe('soft');
    expect(parse('write_lat', '--ib-dev=C:\\x\\i40wb.dll').provider).toBe('C:\\x\\i40wb.dll');
    expect(parse('write_lat', '-d', '10.1.2.3')).toMatchObject({ bind: '10.1.2.3', provider: 'auto' });
    refused(['write_lat', '-d', 'mlx5_0'], /-d mlx5_0: on Linux -d names an ibv device; netdirect opens an ND v2 provider/);
    refused(['write_lat', '-d', 'rxe0'], /netdirect list/);
  });
  it('--output: one figure, matching the test', () => {
    expect(parse('write_bw', '--output=bandwidth').output).toBe('bandwidth');
    expect(parse('write_bw', '--output', 'message_rate').output).toBe('message_rate');
    expect(parse('write_lat', '--output=latency').output).toBe('latency');
    refused(['write_lat', '--output=bandwidth'], /for the \*_bw tests; use latency/);
    refused(['write_bw', '--output=latency'], /for the \*_lat tests/);
    refused(['write_bw', '--output=everything'], /bandwidth\|message_rate\|latency/);
  });
  it('-w / -y: verifier limits for bandwidth tests', () => {
    expect(parse('write_bw', '-w', '100', '-y', '0.5')).toMatchObject({ limitBw: 100, limitMsgRate: 0.5 });
    expect(parse('write_bw', '--limit_bw=2.5').limitBw).toBe(2.5);
    refused(['write_lat', '-w', '1'], /bandwidth limits/);
  });
  it('--run_infinitely: one size, -D defaults to 5 s as perftest\'s report period', () => {
    expect(parse('write_bw', '--run_infinitely')).toMatchObject({ runInfinitely: true, duration: 5 });
    expect(parse('write_bw', '--run_infinitely', '-D', '1').duration).toBe(1);
    refused(['write_bw', '--run_infinitely', '-a'], /one size/);
    refused(['write_bw', '--run_infinitely', '--compare', 'tcp'], /drop --compare/);
  });
  it('--out_json and --out_json_file= are --json (perftest\'s default file name)', () => {
    expect(parse('write_bw', '--out_json').json).toBe('perftest_out.json');
    expect(parse('write_bw', '--out_json', '--out_json_file=r.json').json).toBe('r.json');
    expect(parse('write_bw', '--out_json_file', 'x.json', '--out_json').json).toBe('x.json');
  });
  it('-V and --version', () => {
    expect(parseArgs(['-V'], {})).toBe('version');
    expect(parseArgs(['write_lat', '--version'], {})).toBe('version');
  });
});

describe('perftest flags that select what ND v2 / iWARP has not: accepted with a reason, or refused with it', () => {
  it.each([
    [['-F'], null],
    [['--CPU-freq'], null],
    [['-R'], /ND v2 connector/],
    [['-z'], /control connection and ND private data/],
    [['-x', '3'], /no GID table/],
    [['--gid-index=0'], /no GID table/],
    [['-m', '4096'], /no IB path MTU/],
    [['-m1024'], /no IB path MTU/],
    [['-u', '14'], /no QP retry timeout.*NETDIRECT_SOFT_TCP_TIMEOUT_MS/],
    [['-l', '8'], /posted in runs \(prepared\.postMany\(\), one native call each\) by write_bw and read_bw with --completion manual/],
    [['-S', '3'], /service levels/],
    [['-c', 'RC'], null],
    [['-i', '1'], null],
  ])('%j is accepted', (flags, reason) => {
    const o = parse('write_bw', ...(flags as string[]));
    if (reason === null) expect(o.notes).toEqual([]);
    else {
      expect(o.notes).toHaveLength(1);
      expect(o.notes[0]).toMatch(reason);
    }
  });

  it('-l with --completion manual: write_bw posts in batches of that many, without a note', () => {
    const o = parse('write_bw', '-l', '16', '--completion', 'manual');
    expect(o.notes).toEqual([]);
    expect(o.postList).toBe(16);
  });

  it.each([
    [['-c', 'UD'], /-c UD: only RC here — ND v2 queue pairs are reliable and connected/],
    [['-cUC'], /iWARP \(RDMA over TCP\) has no UC, UD/],
    [['--connection=XRC'], /only RC/],
    [['-i', '2'], /one port \(perftest's IB port 1\)/],
    [['-O'], /one port/],
    [['-W', 'counters/port_xmit_data'], /performance counters.*ND v2 adapter does not expose/],
    [['-T', '32'], /type of service/],
    [['-x', 'a'], /whole number/],
  ])('%j is refused with the reason', (flags, reason) => refused(['write_bw', ...(flags as string[])], reason));
});

describe('OSU flags', () => {
  it('-m min:max: sizes doubling from min to max; ":max", "min:"', () => {
    expect(parse('write_lat', '-m', '4:64').sizes).toEqual([4, 8, 16, 32, 64]);
    expect(parse('write_lat', '-m', ':8').sizes).toEqual([1, 2, 4, 8]);
    expect(parse('write_lat', '-m', '1048576:').sizes).toEqual([1 << 20, 1 << 21, 1 << 22, 1 << 23]);
    expect(parse('write_lat', '-m4:8').sizes).toEqual([4, 8]);
    refused(['write_lat', '-m', '64:4'], /min <= max/);
    refused(['write_lat', '-m', '4:64', '-s', '8'], /exclusive/);
  });
  it('-W <n> is the window (-t); --warmup, --iterations, --window-size', () => {
    expect(parse('write_bw', '-W', '32').txDepth).toBe(32);
    expect(parse('write_bw', '--window-size=16', '--iterations=100', '--warmup=7')).toMatchObject({ txDepth: 16, iters: 100, warmup: 7 });
    expect(warmupOf(parse('write_bw', '--warmup', '0'))).toBe(0);
    expect(warmupOf(parse('write_lat', '-n', '1000'))).toBe(100);
  });
  it('with --format osu, -i is iterations, -x warm-up and -m <max> a size range; without it perftest\'s meanings', () => {
    expect(parse('write_lat', '--format', 'osu', '-i', '500', '-x', '20', '-m', '16')).toMatchObject({ iters: 500, warmup: 20, sizes: [1, 2, 4, 8, 16] });
    expect(parse('write_lat', '-i', '500', '--format=osu').iters).toBe(500);
    refused(['write_lat', '-i', '500'], /for OSU's iteration count use -n 500/);
    const p = parse('write_lat', '-x', '20');
    expect(p.warmup).toBeUndefined();
    expect(p.notes[0]).toMatch(/-x 20: .*--warmup, or -x with --format osu/);
  });
});
