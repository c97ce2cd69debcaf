// What a saga knows of its send's effect once the send is settled (reconciled-send.ts): unknown, as certain as its
// last failure says; none, when proven absent; or what its receipt says, for certain.
import type { EffectStatus } from '../../contract';
import type { Certainty } from '../../reliability/taxonomy';
import type { Found } from './reconciled-send';

export function sentEffect<R, S extends EffectStatus>(
  found: Found<R>,
  lastFailure: { certainty: Certainty } | null,
  status: (receipt: R) => S,
) {
  if (found === 'unknown') return { status: 'unknown', certainty: lastFailure?.certainty ?? 'undeterminable' } as const;
  if (found === 'absent') return { status: 'none', certainty: 'not_executed' } as const;
  return { status: status(found), certainty: 'completed' } as const;
}
