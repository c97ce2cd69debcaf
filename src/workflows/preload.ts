// Modules every run of a worker thread shares: the SDK evaluates them once, before any run, and
// deep-freezes what they export (bundleWorkflowCode's preloadModules). Every other module of the
// workflow bundle is evaluated again for each run, which for zod cost a fifth of a run's CPU.
//
// Only a library whose state no run can see belongs here, never our own modules: a frozen zod
// schema cannot be parsed with (zod binds its methods onto a schema lazily), and a module that keeps
// state would share it between runs. What zod keeps at module level is either scratch space of one
// synchronous parse or construction (its memoizer's, its lazy members'), or caches keyed by schema,
// and each run builds its own schemas; the registry of schema metadata is not used by workflow code
// (no .meta(), no .describe()), and must not be. Its settings, which it would otherwise write on
// first use into an object frozen by then, are fixed here for every run:
// - English messages;
// - jitless, which is required, not a choice: compiling a parser reads a frozen lazy flag, and
//   throws (it would not pay anyway: each run builds its schemas anew);
// - its memoizer.
// Frozen too are zod's own regular expressions, so a string format whose check resets one of them
// (z.email(), z.guid(), z.iso.date() and other built-in formats, .lowercase(), .uppercase()) throws in
// workflow code: workflow-side schemas use .regex() with a pattern of their own. The integration
// tests run this bundle (bundleRefundWorkflows), so a schema that breaks the rule fails there.
import { ed25519 } from '@noble/curves/ed25519';
import { z } from 'zod';

z.config({ ...z.locales.en(), jitless: true, memoizer: z.memoizer() });

// Exported so that the bundle preloads the whole of zod: webpack otherwise resolves each import to
// the one zod module it needs (zod has no side effects), and only those would be shared.
export { z };

// The decide Update's signatures (src/saga/workflow/signature-check.ts). Evaluating @noble/curves
// costs tens of milliseconds: once per worker thread here, not once per run. Its base point's tables
// are built here too (window 4: tens of milliseconds), not by the first verification inside a
// validator (its default window 8 takes hundreds). Its only state is those tables, in WeakMaps
// that freezing leaves usable, derived from constants: no run can tell it is shared.
ed25519.ExtendedPoint.BASE.precompute(4, false);
export { ed25519 };
