// Modules every run of a worker thread shares: the SDK evaluates them once and deep-freezes what they export
// (bundleWorkflowCode's preloadModules); a module not loaded here is evaluated again for each run. zod keeps at module
// level only scratch space of one synchronous parse and caches keyed by schema (ours are shared too, below: what zod
// caches on one is derived from it alone); workflow code must not use its metadata registry (.meta(), .describe()). Its settings are fixed here, before the freeze: English messages,
// its memoizer, and jitless (required: compiling a parser reads a frozen lazy flag, and throws). Its own regular
// expressions are frozen too, so a built-in format (z.email(), z.guid(), z.iso.date(), .lowercase() …) throws in
// workflow code, whose schemas use .regex() with a pattern of their own; the integration tests run this bundle, so a
// schema that breaks the rule fails there.
import { ed25519 } from '@noble/curves/ed25519';
import { z } from 'zod';

z.config({ ...z.locales.en(), jitless: true, memoizer: z.memoizer() });

// Exported so that the bundle preloads the whole of zod: webpack otherwise resolves each import to
// the one zod module it needs (zod has no side effects), and only those would be shared.
export { z };

// The decide Update's signatures (src/saga/workflow/signature-check.ts): evaluating @noble/curves, and building its base
// point's tables (window 4; the default 8 would take hundreds of ms in the first validator), costs tens of milliseconds
// once per worker thread, not per run. Its only state is those tables, in WeakMaps freezing leaves usable: no run can
// tell it is shared.
ed25519.ExtendedPoint.BASE.precompute(4, false);
export { ed25519 };

// Webpack's names for the bundle's module table and loader (only this bundle's code sees them).
declare const __webpack_modules__: Record<string, unknown>;
declare const __webpack_require__: (id: string) => unknown;

/** Freezes what a module exports, as the SDK would, except zod schemas: zod binds methods and caches parsers on them
 * lazily, and a frozen one cannot parse. A frozen object is one the SDK's freeze then leaves as it is. */
function freezeAllButSchemas(value: unknown, seen: WeakSet<object>): void {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return;
  if (seen.has(value) || value instanceof z.ZodType) return;
  seen.add(value);
  if (typeof value === 'object')
    for (const key of Reflect.ownKeys(value)) freezeAllButSchemas(Reflect.get(value, key), seen);
  try {
    Object.freeze(value);
  } catch {
    // a typed array's elements cannot be frozen; the SDK's freeze skips it the same way
  }
}

// Every module of our own, evaluated once per worker thread rather than once per run: they keep no state at module
// level (test/integration/shared-modules.test.ts runs two interleaved runs in one thread and replays each alone), and
// their schemas, shared and unfrozen, hold nothing of a run.
const seen = new WeakSet<object>();
for (const id of Object.keys(__webpack_modules__))
  if (!id.includes('node_modules')) freezeAllButSchemas(__webpack_require__(id), seen);
