// The order of a saga's steps as their definitions declare it: each names the steps it depends on, which run
// before it and are compensated after it. A definition that breaks the rules is refused when its module loads.

/** The part of a saga's definitions the order reads: each step's dependencies, in declaration order. */
export type DependencyGraph<S extends string = string> = Readonly<Record<S, { readonly dependsOn: readonly S[] }>>;

/**
 * Throws, naming the problem, unless every dependency names a known step declared before the step
 * that names it (so the declaration order is a valid order to run them in) and there is no cycle.
 */
export function checkRegistry(registry: DependencyGraph): void {
  const declared = Object.keys(registry);
  // A cycle also names a later step, but "a → b → a" says more than "depends on a later step".
  for (const step of declared) {
    const cycle = cycleFrom(registry, [step]);
    if (cycle) throw new Error(`steps depend on each other in a cycle: ${cycle.join(' → ')}`);
  }
  for (const [position, step] of declared.entries()) {
    for (const dependency of registry[step]!.dependsOn) {
      if (!declared.includes(dependency)) throw new Error(`step ${step} depends on unknown step ${dependency}`);
      if (declared.indexOf(dependency) >= position)
        throw new Error(
          `step ${step} depends on ${dependency}, which is declared after it: a step may depend only on earlier steps`,
        );
    }
  }
}

/** The dependency path from `path[0]` back to itself, if there is one. */
function cycleFrom(registry: DependencyGraph, path: string[]): string[] | null {
  for (const dependency of registry[path[path.length - 1]!]?.dependsOn ?? []) {
    if (dependency === path[0]) return [...path, dependency];
    if (path.includes(dependency)) continue; // a cycle not through path[0]: found from its own start
    const cycle = cycleFrom(registry, [...path, dependency]);
    if (cycle) return cycle;
  }
  return null;
}

/** Every step `step` depends on, directly or through others. */
function dependenciesOf(registry: DependencyGraph, step: string, found = new Set<string>()): Set<string> {
  for (const dependency of registry[step]?.dependsOn ?? []) {
    if (found.has(dependency)) continue;
    found.add(dependency);
    dependenciesOf(registry, dependency, found);
  }
  return found;
}

/**
 * The order in which finished steps are compensated: a step before every step it depends on
 * (directly or through a step that did not finish), ties broken by reverse declaration order.
 * Since dependencies name only earlier steps, that is exactly the reverse of the declaration
 * order, which recorded histories replay; a new dependency changes it only where it must.
 */
export function compensationOrder<S extends string>(completed: readonly S[], registry: DependencyGraph<S>): S[] {
  const latestFirst = Object.keys(registry).reverse() as S[];
  const unknown = completed.filter((step) => !latestFirst.includes(step));
  if (unknown.length > 0) throw new Error(`cannot order unknown steps: ${unknown.join(', ')}`);
  let left = latestFirst.filter((step) => completed.includes(step));
  const order: S[] = [];
  while (left.length > 0) {
    // Ready: no step still to compensate depends on it.
    const ready = left.find((step) => !left.some((other) => dependenciesOf(registry, other).has(step)));
    if (ready === undefined) throw new Error(`steps depend on each other in a cycle: ${left.join(', ')}`);
    order.push(ready);
    left = left.filter((step) => step !== ready);
  }
  return order;
}
