// The product's sources compiled once per run (test/global-setup-quick.ts), for the CLI and worker processes tests
// start: plain `node` loads a compiled script in about half the CPU of `node --import tsx` on the source (about
// 1 CPU-s less each; docs/testing.md). The tree is laid out as a production install's (lib/ beside package.json and
// node_modules), so that PROJECT_ROOT and the package's version resolve as they do there.
import { transformFile } from '@swc/core';
import fs from 'node:fs';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');

/** Compiles src/ into `dir`/lib (CommonJS, as jest's transform) and returns `dir`. */
export async function compileSources(dir: string): Promise<string> {
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(root, 'package.json'), path.join(dir, 'package.json'));
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  const files = fs.readdirSync(path.join(root, 'src'), { recursive: true, encoding: 'utf8' });
  await Promise.all(
    files.map(async (file) => {
      const from = path.join(root, 'src', file);
      const to = path.join(dir, 'lib', file.replace(/\.ts$/, '.js'));
      if (fs.statSync(from).isDirectory()) return;
      fs.mkdirSync(path.dirname(to), { recursive: true });
      if (!file.endsWith('.ts')) return fs.copyFileSync(from, to);
      const { code } = await transformFile(from, {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
        module: { type: 'commonjs' },
        swcrc: false,
      });
      fs.writeFileSync(to, code);
    }),
  );
  return dir;
}

/**
 * Where `script` (a path under src/, e.g. 'cli/decide.ts') is in the run's compiled copy, or its source when the run
 * has none (a file run without the global setup), which needs tsx.
 */
export function scriptPath(script: string): string {
  const compiled = process.env.TEST_COMPILED_SRC;
  return compiled ? path.join(compiled, 'lib', script.replace(/\.ts$/, '.js')) : path.join(root, 'src', script);
}

/** The arguments to `process.execPath` that run `script` (as for scriptPath) with `args`. */
export function nodeArgs(script: string, ...args: string[]): string[] {
  const file = scriptPath(script);
  return [...(file.endsWith('.ts') ? ['--import', 'tsx'] : []), file, ...args];
}
