import { REFUND_SAGA, REFUND_STEPS, type RefundStep } from '../../src/compensations/registry';
import { checkRegistry, compensationOrder, type DependencyGraph } from '../../src/saga/order';
import { compensationKeyOf } from '../../src/compensations/plan';
import { checkCarriage, withCarriage, type EffectKind, type StepCall } from '../../src/saga/step';
import type { Boundary } from '../../src/reliability/taxonomy';
import { z } from 'zod';
import { compensationKey, operationId, stepKey } from '../../src/contract';

const steps = Object.entries(REFUND_SAGA) as [RefundStep, (typeof REFUND_SAGA)[RefundStep]][];
const TEXT_FIELDS = ['action', 'escalation'] as const;

/** True when every step comes before each step it depends on, directly or not. */
function dependentsFirst<S extends string>(order: S[], registry: DependencyGraph<S>): boolean {
  const dependsOn = (step: S, other: S): boolean =>
    registry[step].dependsOn.some((d) => d === other || dependsOn(d, other));
  return order.every((step, i) => order.slice(0, i).every((earlier) => !dependsOn(step, earlier)));
}

describe('the refund saga registry', () => {
  it('declares the steps in the order the saga runs them', () => {
    expect(Object.keys(REFUND_SAGA)).toEqual([...REFUND_STEPS]);
  });

  it.each(steps)('%s declares every field', (_step, registration) => {
    for (const field of TEXT_FIELDS) expect(registration[field].trim()).not.toBe('');
    expect(['store', 'stripe', 'smtp']).toContain(registration.boundary);
    expect(['stop', 'forward_repair']).toContain(registration.onFailure);
    expect(typeof registration.pointOfNoReturn).toBe('boolean');
    expect(Array.isArray(registration.dependsOn)).toBe(true);
    const { undo } = registration;
    if (undo.kind === 'forward_repair') expect(undo.note.trim()).not.toBe('');
    if (undo.kind === 'compensation') expect(typeof undo.input).toBe('function');
  });

  it('has exactly one point of no return, create_refund, and every step after it is repaired forward', () => {
    const points = steps.filter(([, r]) => r.pointOfNoReturn).map(([step]) => step);
    expect(points).toEqual(['create_refund']);
    const after = REFUND_STEPS.slice(REFUND_STEPS.indexOf('create_refund') + 1);
    for (const step of after) expect([step, REFUND_SAGA[step].onFailure]).toEqual([step, 'forward_repair']);
    expect(REFUND_SAGA.create_refund.undo.kind).toBe('forward_repair');
  });

  it('gives each compensation a key distinct from every forward key', () => {
    const op = operationId('local', 'ord_1', 1);
    const forwardKeys = [op, ...REFUND_STEPS.map((step) => stepKey(op, step))];
    const compensationKeys = (['update_order', 'notify_customer'] as const).map((step) => compensationKeyOf(step, op));
    expect(compensationKeys).toEqual([`${op}:update_order:compensate`, `${op}:notify_customer:compensate`]);
    for (const key of [...compensationKeys, compensationKey(op)]) expect(forwardKeys).not.toContain(key);
    expect(new Set(compensationKeys).size).toBe(compensationKeys.length);
    expect(() => compensationKeyOf('create_refund', op)).toThrow('has no compensation');
  });

  it('passes its own check', () => {
    expect(() => checkRegistry(REFUND_SAGA)).not.toThrow();
  });
});

describe('compensationOrder', () => {
  it('is the reverse of the declaration order for the refund saga, whatever order the steps finished in', () => {
    expect(compensationOrder([...REFUND_STEPS], REFUND_SAGA)).toEqual([...REFUND_STEPS].reverse());
    expect(compensationOrder(['update_order', 'load_order', 'notify_customer', 'create_refund'], REFUND_SAGA)).toEqual([
      'notify_customer',
      'update_order',
      'create_refund',
      'load_order',
    ]);
    expect(compensationOrder(['load_order', 'create_refund', 'update_order'], REFUND_SAGA)).toEqual([
      'update_order',
      'create_refund',
      'load_order',
    ]);
    expect(compensationOrder([], REFUND_SAGA)).toEqual([]);
  });

  // reserve ← charge ← {invoice, ship}; label ← ship; audit is independent.
  const shop = {
    reserve: { dependsOn: [] },
    charge: { dependsOn: ['reserve'] },
    ship: { dependsOn: ['charge'] },
    audit: { dependsOn: [] },
    label: { dependsOn: ['ship'] },
    invoice: { dependsOn: ['charge'] },
  } satisfies DependencyGraph;
  const all = Object.keys(shop) as (keyof typeof shop)[];

  it('compensates a step before every step it depends on, ties in reverse declaration order', () => {
    const order = compensationOrder(all, shop);
    expect(order).toEqual(['invoice', 'label', 'audit', 'ship', 'charge', 'reserve']);
    expect(dependentsFirst(order, shop)).toBe(true);
  });

  it('leaves out the steps that did not finish', () => {
    expect(compensationOrder(['label', 'reserve', 'audit'], shop)).toEqual(['label', 'audit', 'reserve']);
  });

  // Graphs checkRegistry would refuse (a dependency declared later): the dependency still wins over the tie-break.
  it('lets a dependency win over the declaration order', () => {
    const graph = { a: { dependsOn: ['b'] }, b: { dependsOn: [] }, c: { dependsOn: [] } } satisfies DependencyGraph;
    const order = compensationOrder(['a', 'b', 'c'], graph);
    expect(order).toEqual(['c', 'a', 'b']);
    expect(dependentsFirst(order, graph)).toBe(true);
  });

  it('keeps a dependency through a step that did not finish', () => {
    const graph = { a: { dependsOn: ['b'] }, b: { dependsOn: ['c'] }, c: { dependsOn: [] } } satisfies DependencyGraph;
    expect(compensationOrder(['a', 'c'], graph)).toEqual(['a', 'c']);
  });
});

describe('checkRegistry', () => {
  it('accepts dependencies on earlier steps', () => {
    expect(() =>
      checkRegistry({ a: { dependsOn: [] }, b: { dependsOn: ['a'] }, c: { dependsOn: ['a', 'b'] } }),
    ).not.toThrow();
  });

  it('rejects a cycle, naming it', () => {
    const graph = { a: { dependsOn: ['c'] }, b: { dependsOn: ['a'] }, c: { dependsOn: ['b'] } };
    expect(() => checkRegistry(graph)).toThrow('steps depend on each other in a cycle: a → c → b → a');
    expect(() => checkRegistry({ a: { dependsOn: ['a'] } })).toThrow('cycle: a → a');
  });

  it('rejects a dependency on a later step', () => {
    expect(() => checkRegistry({ a: { dependsOn: ['b'] }, b: { dependsOn: [] } })).toThrow(
      'step a depends on b, which is declared after it: a step may depend only on earlier steps',
    );
  });

  it('rejects a dependency on an unknown step', () => {
    expect(() => checkRegistry({ a: { dependsOn: [] }, b: { dependsOn: ['refund'] } })).toThrow(
      'step b depends on unknown step refund',
    );
  });
});

describe('checkCarriage', () => {
  const call = (effect: EffectKind, boundary: Boundary, more: Partial<StepCall> = {}): StepCall => ({
    activity: 'a',
    effect,
    boundary,
    runs: 'effects',
    output: z.object({}),
    ...more,
  });

  it("accepts the refund's own: the order update on the refund's receipt, the gate's first read in the notice", () => {
    expect(REFUND_SAGA.update_order.carriedBy).toBe('create_refund');
    expect(REFUND_SAGA.completion_gate.firstReadIn).toBe('notify_customer');
    expect(() => checkCarriage(REFUND_SAGA)).not.toThrow();
    // The send learns what it carries from the carried step's own declaration.
    expect(REFUND_SAGA.create_refund.carries).toEqual(['update_order']);
    expect(Object.values(REFUND_SAGA).filter((s) => 'carries' in s)).toHaveLength(1);
  });

  it('withCarriage checks the steps and gives each send the names of the steps it carries', () => {
    const steps = {
      a: call('send', 'stripe'),
      b: call('write', 'store', { carriedBy: 'a' }),
      c: call('read', 'stripe'),
    };
    expect(withCarriage(steps)).toEqual({ ...steps, a: { ...steps.a, carries: ['b'] } });
    expect(() => withCarriage({ b: steps.b, a: steps.a })).toThrow(
      'step b is carried by a, which is not a step declared before it',
    );
  });

  it('refuses a carrier that is not an earlier send, or a carried step that is not a store write', () => {
    const send = call('send', 'stripe');
    expect(() => checkCarriage({ b: call('write', 'store', { carriedBy: 'a' }), a: send })).toThrow(
      'step b is carried by a, which is not a step declared before it',
    );
    expect(() => checkCarriage({ a: call('read', 'stripe'), b: call('write', 'store', { carriedBy: 'a' }) })).toThrow(
      "step b is carried by a: only a store write rides on a send's receipt",
    );
    expect(() => checkCarriage({ a: send, b: call('send', 'smtp', { carriedBy: 'a' }) })).toThrow(/only a store write/);
  });

  it('refuses a first read in an unknown step, or of a step that is not a read', () => {
    const send = call('send', 'smtp');
    expect(() => checkCarriage({ a: send, b: call('read', 'stripe', { firstReadIn: 'c' }) })).toThrow(
      'step b is read first in c, which is not a step declared before it',
    );
    expect(() => checkCarriage({ a: send, b: call('write', 'store', { firstReadIn: 'a' }) })).toThrow(
      'step b has its first read in a, but it is a write, not a read',
    );
  });
});
