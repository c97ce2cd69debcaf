// Modules every run of a worker thread shares: the SDK evaluates them once and deep-freezes what they export
// (bundleWorkflowCode's preloadModules); every other module is evaluated again for each run, which for zod cost a
// fifth of a run's CPU. Only a library whose state no run can see belongs here, never our own modules (a frozen zod
// schema cannot parse: zod binds its methods lazily), nor state runs would share. zod keeps at module level only
// scratch space of one synchronous parse and caches keyed by schema (each run builds its own); workflow code must not
// use its metadata registry (.meta(), .describe()). Its settings are fixed here, before the freeze: English messages,
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
