// ndbench's option parsing (no addon, no I/O): perftest's names and defaults, netdirect's additions, misuse.
import { describe, expect, it } from 'vitest';
import { BW_WARMUP, DEFAULT_PORT, UsageError, allSizes, mpiRank, parseArgs, tcpMode, warmupOf } from '../../lib/bench/options';

const parse = (...argv: string[]) => parseArgs(argv, {})!;

describe('ndbench options', () => {
  it('a server takes no host, a client the server host; perftest defaults', () => {
    const server = parse('write_lat');
    expect(server).toMatchObject({ test: 'write_lat', server: undefined, port: DEFAULT_PORT, sizes: [2], iters: 1000, duration: 0 });
    expect(server).toMatchObject({ completion: 'auto', format: 'perftest', reportGbits: false, compare: [], loopback: false, qps: 1, txDepth: 128 });
    const client = parse('write_bw', '10.0.0.1');
    expect(client).toMatchObject({ test: 'write_bw', server: '10.0.0.1', sizes: [65536], iters: 5000 });
    expect(parse('read_bw').iters).toBe(1000);
  });

  it('short and long forms, --opt=value, every option', () => {
    const o = parse('send_bw', 'host', '-p', '9000', '-s', '4096', '-n', '77', '-D', '2.5', '--provider', 'soft', '--completion', 'manual',
      '--crc=off', '--format', 'osu', '--json', 'r.json', '--report_gbits', '--compare', 'tcp', '--compare=node-net', '--plot', 'p.svg',
      '-t', '64', '--tcp-mode', 'block', '--spin-micros', '50', '--timeout', '9', '--no-progress');
    expect(o).toMatchObject({
      port: 9000, sizes: [4096], iters: 77, duration: 2.5, provider: 'soft', completion: 'manual', crc: 'off', format: 'osu',
      json: 'r.json', reportGbits: true, compare: ['tcp', 'node-net'], plot: 'p.svg', txDepth: 64, tcpMode: 'block', spinMicros: 50,
      timeout: 9, progress: false, sizeGiven: true, itersGiven: true,
    });
    expect(parse('write_lat', '--size=8', '--iters=5', '--port=1').sizes).toEqual([8]);
    expect(parse('write_lat', '--compare', 'tcp,node-net,tcp').compare).toEqual(['tcp', 'node-net']);
  });

  it('-a is perftest\'s 2 … 8 MiB, doubling', () => {
    const sizes = parse('write_bw', '-a').sizes;
    expect(sizes).toEqual(allSizes());
    expect(sizes[0]).toBe(2);
    expect(sizes[sizes.length - 1]).toBe(8 * 1024 * 1024);
    expect(sizes).toHaveLength(23);
  });

  it('--loopback, -q for bandwidth tests, reg_mr', () => {
    expect(parse('write_lat', '--loopback').loopback).toBe(true);
    expect(parse('write_bw', '-q', '1000').qps).toBe(1000);
    expect(parse('reg_mr').sizes).toEqual([4096]);
  });

  it('the TCP baseline busy-polls with --completion manual unless told otherwise', () => {
    expect(tcpMode(parse('write_lat'))).toBe('block');
    expect(tcpMode(parse('write_lat', '--completion', 'manual'))).toBe('spin');
    expect(tcpMode(parse('write_lat', '--completion', 'manual', '--tcp-mode', 'block'))).toBe('block');
  });

  it('--help returns null', () => {
    expect(parseArgs(['--help'], {})).toBeNull();
    expect(parseArgs(['write_lat', '-h'], {})).toBeNull();
  });

  it.each([
    [[], /which test/],
    [['write_latency'], /unknown test/],
    [['write_lat', '-s'], /-s needs a value/],
    [['write_lat', '-s', '0'], /-s must be in 1\.\./],
    [['write_lat', '-s', '1k'], /whole number/],
    [['write_lat', '-n', '4'], /-n must be in 5\.\./],
    [['write_lat', '-a', '-s', '8'], /exclusive/],
    [['write_lat', '--completion', 'event'], /thread\|manual/],
    [['write_lat', '--crc', 'yes'], /on\|off/],
    [['write_lat', '--format', 'csv'], /perftest\|osu\|json/],
    [['write_lat', '--compare', 'udp'], /tcp\|node-net/],
    [['write_lat', '--compare', 'native'], /--compare native: .*add --completion manual/],
    [['send_bw', '--compare', 'native', '--completion', 'manual'], /--compare native: the native baseline runs write_lat, read_lat, send_lat and write_bw, not send_bw/],
    [['write_lat', '--plot', 'x.png'], /SVG/],
    [['write_lat', '-q', '2'], /\*_bw/],
    [['write_lat', 'host', '--loopback'], /no server host/],
    [['write_lat', 'a', 'b'], /too many/],
    [['write_lat', '--frobnicate'], /unknown option/],
    [['write_lat', '-D', 'x'], /-D must be a number/],
  ])('usage error: %j', (argv, message) => {
    expect(() => parseArgs(argv as string[], {})).toThrow(UsageError);
    expect(() => parseArgs(argv as string[], {})).toThrow(message);
  });

  it('MPI launchers: rank 0 serves, rank 1 connects; exactly two ranks', () => {
    expect(mpiRank({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '2' })).toEqual({ rank: 1, size: 2 });
    expect(mpiRank({ PMI_RANK: '0', PMI_SIZE: '2' })).toEqual({ rank: 0, size: 2 });
    expect(mpiRank({})).toBeUndefined();
    expect(parseArgs(['write_lat', '10.1.1.1'], { PMI_RANK: '0', PMI_SIZE: '2' })!.server).toBeUndefined();
    expect(parseArgs(['write_lat', '10.1.1.1'], { PMI_RANK: '1', PMI_SIZE: '2' })!.server).toBe('10.1.1.1');
    expect(parseArgs(['write_lat'], { PMI_RANK: '1', PMI_SIZE: '2', NDBENCH_SERVER: '10.2.2.2' })!.server).toBe('10.2.2.2');
    expect(() => parseArgs(['write_lat'], { PMI_RANK: '1', PMI_SIZE: '4' })).toThrow(/exactly 2 MPI ranks/);
  });

  it('Slurm: a plain command inside an allocation is not a launch; srun tasks are (issue #12)', () => {
    // salloc / sbatch set SLURM_NTASKS and SLURM_PROCID for the whole allocation: ndbench runs as typed.
    const allocation = { SLURM_JOB_ID: '7', SLURM_NTASKS: '1', SLURM_PROCID: '0' };
    expect(mpiRank(allocation)).toBeUndefined();
    const plain = parseArgs(['write_lat'], allocation)!;
    expect([plain.server, plain.rank]).toEqual([undefined, undefined]);
    const client = parseArgs(['write_lat', '10.0.0.5'], { ...allocation, SLURM_NTASKS: '2' })!;
    expect([client.server, client.rank]).toEqual(['10.0.0.5', undefined]);
    // srun -n 2: SLURM_STEP_NUM_TASKS is the step's size.
    expect(mpiRank({ ...allocation, SLURM_NTASKS: '2', SLURM_PROCID: '1', SLURM_STEP_NUM_TASKS: '2' })).toEqual({ rank: 1, size: 2 });
    // One rank is no launch, whichever launcher.
    expect(mpiRank({ PMI_RANK: '0', PMI_SIZE: '1' })).toBeUndefined();
    expect(parseArgs(['write_lat', '10.0.0.5'], { OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '1' })!.server).toBe('10.0.0.5');
    expect(() => mpiRank({ PMI_RANK: '3', PMI_SIZE: '2' })).toThrow(/not a rank of a launch/);
  });

  it('as rank 0 of 2, a server host is where rank 0 serves, not ignored (issue #12)', () => {
    const rank0 = { SLURM_PROCID: '0', SLURM_STEP_NUM_TASKS: '2', SLURM_NTASKS: '2' };
    expect(parseArgs(['write_lat', '10.0.0.5'], rank0)).toMatchObject({ server: undefined, bind: '10.0.0.5', rank: 0 });
    expect(parseArgs(['write_lat', '10.0.0.5'], { ...rank0, SLURM_PROCID: '1' })).toMatchObject({ server: '10.0.0.5', rank: 1 });
    expect(parseArgs(['write_lat'], rank0)).toMatchObject({ server: undefined, bind: undefined });
    expect(() => parseArgs(['write_lat', '10.0.0.5', '--bind', '10.0.0.6'], rank0)).toThrow(/--bind says 10.0.0.6/);
  });

  it('warms up every pattern alike: latency up to 100 iterations, write/read bandwidth up to BW_WARMUP, send_bw none', () => {
    expect(warmupOf({ test: 'write_lat', iters: 5000, duration: 0 })).toBe(100);
    expect(warmupOf({ test: 'write_lat', iters: 50, duration: 0 })).toBe(5);
    expect(warmupOf({ test: 'write_bw', iters: 20000, duration: 0 })).toBe(BW_WARMUP);
    expect(warmupOf({ test: 'read_bw', iters: 20, duration: 0 })).toBe(20);
    expect(warmupOf({ test: 'write_bw', iters: 5000, duration: 2 })).toBe(BW_WARMUP);
    expect(warmupOf({ test: 'send_bw', iters: 5000, duration: 0 })).toBe(0);
  });
});
