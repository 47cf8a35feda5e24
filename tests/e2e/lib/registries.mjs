// Package registries for the package tests, made by the test itself (there is no PyPI or
// npm registry here): tiny Python packages built into real wheels and an sdist with
// Debian's /usr/bin/python3 (pip, setuptools and wheel; never root's pyenv python), npm
// tarballs made with tar, and static registries on 127.0.0.1 that serve them and record
// every request they get (the upstream's access log).

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export const kSystemPython = '/usr/bin/python3';

// Nothing of the caller's pip configuration may change how the fixtures are built.
const kPipEnv = {
  PATH: '/usr/bin:/bin',
  HOME: '/nonexistent',
  PIP_CONFIG_FILE: '/dev/null',
  PIP_NO_INDEX: '1',
  PIP_DISABLE_PIP_VERSION_CHECK: '1',
  PYTHONDONTWRITEBYTECODE: '1',
};

export const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

// Writes a setuptools project for `name` under `dir`/src/<name>-<version>: a module whose
// VALUE is `value`, depending on `requires`. Each version has a directory of its own:
// setuptools keeps its build/ there and copies a source into it only when the source is
// newer by mtime, so a second version written within the same second as the first was
// packaged with the first one's files (e2e_packages' upgrade test failed 2 runs in 5).
function writeProject(dir, { name, version, value, requires = [] }) {
  const src = path.join(dir, 'src', `${name}-${version}`);
  mkdirSync(path.join(src, name), { recursive: true });
  writeFileSync(path.join(src, name, '__init__.py'), `VALUE = ${JSON.stringify(value)}\n`);
  writeFileSync(path.join(src, 'setup.py'), `from setuptools import setup
setup(name=${JSON.stringify(name)}, version=${JSON.stringify(version)}, packages=[${JSON.stringify(name)}],
      install_requires=${JSON.stringify(requires)})
`);
  return src;
}

// Builds a wheel of the project into `out`; returns its file name.
export function buildWheel(dir, out, project) {
  const src = writeProject(dir, project);
  mkdirSync(out, { recursive: true });
  const before = new Set(readdirSync(out));
  execFileSync(kSystemPython, ['-m', 'pip', 'wheel', '--no-build-isolation', '--no-index',
    '--no-deps', '-q', '-w', out, src], { env: kPipEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const made = readdirSync(out).filter((f) => !before.has(f) && f.endsWith('.whl'));
  if (made.length !== 1) throw new Error(`pip wheel made ${made.join(', ') || 'nothing'} for ${project.name}`);
  return made[0];
}

// Builds an sdist (.tar.gz) of the project into `out`; returns its file name.
export function buildSdist(dir, out, project) {
  const src = writeProject(dir, project);
  mkdirSync(out, { recursive: true });
  execFileSync(kSystemPython, ['setup.py', '-q', 'sdist', '-d', out], {
    cwd: src, env: kPipEnv, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const name = `${project.name}-${project.version}.tar.gz`;
  readFileSync(path.join(out, name));  // throws when setuptools named it otherwise
  return name;
}

// An npm package tarball (package/ inside, as `npm pack` makes it); returns its bytes.
export function buildNpmTarball(dir, { name, version, files, scripts }) {
  const root = path.join(dir, 'npm-src', `${name}-${version}`);
  mkdirSync(path.join(root, 'package'), { recursive: true });
  const manifest = { name, version, main: 'index.js', ...(scripts ? { scripts } : {}) };
  writeFileSync(path.join(root, 'package', 'package.json'), JSON.stringify(manifest, null, 2));
  for (const [file, text] of Object.entries(files)) {
    writeFileSync(path.join(root, 'package', file), text);
  }
  const tgz = path.join(root, `${name}-${version}.tgz`);
  execFileSync('tar', ['czf', tgz, '-C', root, 'package']);
  return readFileSync(tgz);
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

// A static PEP 503 index at http://127.0.0.1:PORT/simple/: `files` are {name, filename,
// bytes, served?} (served: other bytes than the page's #sha256 promises, a tampered
// artifact). log: every request as "GET /path".
export async function startPypiIndex(files) {
  const log = [];
  const byFile = new Map(files.map((f) => [f.filename, f]));
  const server = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    const page = /^\/simple\/([a-z0-9-]+)\/$/.exec(req.url);
    if (req.method === 'GET' && page) {
      const mine = files.filter((f) => f.name === page[1]);
      if (mine.length === 0) {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('no such project\n');
        return;
      }
      const links = mine.map((f) =>
        `    <a href="../../files/${f.filename}#sha256=${sha256(f.bytes)}">${f.filename}</a><br/>`);
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!DOCTYPE html>\n<html>\n  <body>\n${links.join('\n')}\n  </body>\n</html>\n`);
      return;
    }
    const file = /^\/files\/([^/]+)$/.exec(req.url);
    if (req.method === 'GET' && file && byFile.has(file[1])) {
      const f = byFile.get(file[1]);
      const body = f.served ?? f.bytes;
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length });
      res.end(body);
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/simple/`,
    log,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

// A static npm registry at http://127.0.0.1:PORT/: `packages` are {name, version, bytes,
// hasInstallScript?}; each name's packument lists its versions with dist.tarball,
// dist.integrity (sha512) and dist.shasum.
export async function startNpmRegistry(packages) {
  const log = [];
  let base = '';
  const server = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    const url = decodeURIComponent(req.url);
    const tarball = /^\/([^/]+)\/-\/([^/]+\.tgz)$/.exec(url);
    if (req.method === 'GET' && tarball) {
      const p = packages.find((x) => x.name === tarball[1] && `${x.name}-${x.version}.tgz` === tarball[2]);
      if (p) {
        res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': p.bytes.length });
        res.end(p.bytes);
        return;
      }
    }
    const name = /^\/([^/]+)$/.exec(url);
    const versions = name ? packages.filter((x) => x.name === name[1]) : [];
    if (req.method === 'GET' && versions.length > 0) {
      const packument = { name: name[1], 'dist-tags': {}, versions: {} };
      for (const p of versions) {
        packument['dist-tags'].latest = p.version;
        packument.versions[p.version] = {
          name: p.name,
          version: p.version,
          ...(p.hasInstallScript ? { hasInstallScript: true, scripts: p.scripts } : {}),
          dist: {
            tarball: `${base}${p.name}/-/${p.name}-${p.version}.tgz`,
            integrity: `sha512-${createHash('sha512').update(p.bytes).digest('base64')}`,
            shasum: createHash('sha1').update(p.bytes).digest('hex'),
          },
        };
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(packument));
      return;
    }
    res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"Not found"}');
  });
  const port = await listen(server);
  base = `http://127.0.0.1:${port}/`;
  return { url: base, log, close: () => new Promise((resolve) => server.close(resolve)) };
}
