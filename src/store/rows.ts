// A record the store hands out and the row it is kept in have the same fields: camelCase names, snake_case columns.
type Camel<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Camel<Tail>>}` : S;
type Snake<S extends string> = S extends `${infer C}${infer Rest}`
  ? `${C extends Lowercase<C> ? C : `_${Lowercase<C>}`}${Snake<Rest>}`
  : S;

/** The row a record is kept in: each field under its snake_case column. */
export type RowOf<T> = { [K in keyof T & string as Snake<K>]: T[K] };

/** The record a row holds: every column, under its camelCase name (so the row must hold only the record's columns). */
export function fromRow<R extends object>(row: R): { [K in keyof R & string as Camel<K>]: R[K] } {
  const record: Record<string, unknown> = {};
  for (const [column, value] of Object.entries(row)) record[camelName(column)] = value;
  return record as never;
}

// Every row read passes here: each column's name is converted once per process, not once per row and column.
const camelNames = new Map<string, string>();
function camelName(column: string): string {
  const known = camelNames.get(column);
  if (known !== undefined) return known;
  const name = column.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
  camelNames.set(column, name);
  return name;
}
