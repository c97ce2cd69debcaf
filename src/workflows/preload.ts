// Modules every run of a worker thread shares: the SDK evaluates them once, before any run, and
// deep-freezes what they export (bundleWorkflowCode's preloadModules). Every other module of the
// workflow bundle is evaluated again for each run, which for zod cost a fifth of a run's CPU.
//
// Only stateless libraries belong here, never our own modules: a frozen zod schema cannot be
// parsed with (zod binds its methods onto a schema lazily), and a module that keeps state would
// share it between runs. zod keeps none a run could see: its caches are keyed by schema, and the
// settings it would otherwise write on first use (into a config object frozen by then) are set
// here, the same for every run: English messages, and parsers that are interpreted, not compiled
// with `new Function` per schema (each run builds its schemas anew, so compiling never pays).
import { z } from 'zod';

z.config({ ...z.locales.en(), jitless: true, memoizer: z.memoizer() });

// Exported so that the bundle preloads the whole of zod: webpack otherwise resolves each import to
// the one zod module it needs (zod has no side effects), and only those would be shared.
export { z };
