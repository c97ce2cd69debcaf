// What every failure table shares: rows tried in order, the first whose `when` holds deciding the class.
import type { Certainty, FailureCode } from '../reliability/taxonomy';

export interface Rule<F> {
  when: (facts: F) => boolean;
  code: FailureCode;
  certainty: Certainty;
  reason: string | ((facts: F) => string);
}

export const rule = <F>(
  when: (facts: F) => boolean,
  code: FailureCode,
  certainty: Certainty,
  reason: Rule<F>['reason'],
): Rule<F> => ({ when, code, certainty, reason });

/** The class of the first row that matches; every table ends in a row that always does. */
export function classifyBy<F>(rules: Rule<F>[], facts: F): { code: FailureCode; certainty: Certainty; reason: string } {
  const r = rules.find((row) => row.when(facts))!;
  return { code: r.code, certainty: r.certainty, reason: typeof r.reason === 'string' ? r.reason : r.reason(facts) };
}
