// Stripe's form encoding: `metadata[order_id]=o1`, `expand[0]=charge` or `expand[]=charge`.
export type FormValue = string | FormValue[] | { [key: string]: FormValue };
export type FormParams = { [key: string]: FormValue };

export class FormError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

/** Parses an x-www-form-urlencoded body or query string into Stripe's nested params. */
export function parseForm(encoded: string): FormParams {
  // Null-prototype nodes, so a key like `__proto__` stays an ordinary key.
  const root: FormParams = Object.create(null) as FormParams;
  for (const [name, value] of new URLSearchParams(encoded)) {
    const match = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(name);
    if (!match) throw new FormError(`Invalid parameter name: ${name}`, name);
    const path = [match[1]!, ...[...match[2]!.matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1]!)];
    assign(root, path, value, name);
  }
  return arraysFromIndexes(root) as FormParams;
}

function assign(node: { [key: string]: FormValue }, path: string[], value: string, name: string): void {
  const [head, ...rest] = path as [string, ...string[]];
  // `a[]=x` appends; we model it as the next numeric index and turn index maps into arrays at the end.
  const key = head === '' ? String(Object.keys(node).length) : head;
  if (rest.length === 0) {
    if (key in node) throw new FormError(`Received duplicate parameter: ${name}`, name);
    node[key] = value;
    return;
  }
  const child = node[key];
  if (typeof child === 'string') throw new FormError(`Invalid parameter: ${name} mixes a value and a hash`, name);
  const next = (child ?? Object.create(null)) as { [key: string]: FormValue };
  node[key] = next;
  assign(next, rest, value, name);
}

function arraysFromIndexes(value: FormValue): FormValue {
  if (typeof value === 'string' || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  const entries = keys.map((k) => [k, arraysFromIndexes(value[k]!)] as const);
  const isList = keys.length > 0 && keys.every((k, i) => k === String(i));
  return isList ? entries.map(([, v]) => v) : Object.fromEntries(entries);
}

/** A stable text form of params (sorted keys), so retries with reordered fields still match. */
export function canonicalParams(value: FormValue): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalParams).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalParams(value[k]!)}`).join(',')}}`;
}
