#!/usr/bin/env node
'use strict';
// Linux <-> Windows interop over the software provider on 127.0.0.1: Linux node (the Linux addon) and Windows
// node under Wine (the win32 addon driving netdirect_soft.dll) run test/windows/interop-peer.mjs against each
// other, once with the Windows side serving and once with the Linux side serving. Run by scripts/wine-test.sh,
// which sets NETDIRECT_WINE_NODE (node.exe), NETDIRECT_WINE_STAGE (the staged Windows tree) and the Wine env.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const nodeExe = process.env.NETDIRECT_WINE_NODE;
const stage = process.env.NETDIRECT_WINE_STAGE;
if (!nodeExe || !stage) {
  console.error('wine-interop: run it through scripts/wine-test.sh (NETDIRECT_WINE_NODE / NETDIRECT_WINE_STAGE unset)');
  process.exit(2);
}
const peer = 'test/windows/interop-peer.mjs';

// Windows node's stdout must be a file, never a pipe (node.exe fails with `open EBADF` on a Unix pipe; scripts/wine-test.sh).
function start(side, role, port) {
  const log = path.join(stage, `interop-${side}-${role}.log`);
  const fd = fs.openSync(log, 'w');
  const child =
    side === 'windows'
      ? spawn('wine', [nodeExe, peer, role, String(port)], { cwd: stage, stdio: ['ignore', fd, fd] })
      : spawn(process.execPath, [path.join(root, peer), role, String(port)], { cwd: root, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
  const output = () => fs.readFileSync(log, 'utf8');
  return { child, exited, output, side, role };
}

async function waitFor(p, re, ms) {
  const until = Date.now() + ms;
  let done = false;
  p.exited.then(() => (done = true));
  while (Date.now() < until) {
    if (re.test(p.output())) return;
    if (done) throw new Error(`${p.side} ${p.role} exited before ${re}:\n${p.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${p.side} ${p.role}: no ${re} within ${ms} ms:\n${p.output()}`);
}

async function round(serverSide, clientSide) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const t0 = Date.now();
  const server = start(serverSide, 'serve', port);
  let client;
  const kill = setTimeout(() => {
    server.child.kill('SIGKILL');
    client?.child.kill('SIGKILL');
  }, 120_000);
  try {
    await waitFor(server, /LISTENING/, 60_000);
    client = start(clientSide, 'connect', port);
    const [sc, cc] = await Promise.all([server.exited, client.exited]);
    const ok = sc === 0 && cc === 0 && /^OK serve/m.test(server.output()) && /^OK connect/m.test(client.output());
    console.log(`${ok ? 'PASS' : 'FAIL'} ${serverSide} serves, ${clientSide} connects (${Date.now() - t0} ms)`);
    console.log(`  ${serverSide} serve  (exit ${sc}): ${server.output().trim().split('\n').join('\n    ')}`);
    console.log(`  ${clientSide} connect (exit ${cc}): ${client.output().trim().split('\n').join('\n    ')}`);
    return ok;
  } catch (e) {
    console.log(`FAIL ${serverSide} serves, ${clientSide} connects: ${e.message}`);
    server.child.kill('SIGKILL');
    client?.child.kill('SIGKILL');
    return false;
  } finally {
    clearTimeout(kill);
  }
}

(async () => {
  const a = await round('windows', 'linux');
  const b = await round('linux', 'windows');
  process.exit(a && b ? 0 : 1);
})();
