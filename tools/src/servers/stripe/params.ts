// Parameter checks with Stripe's error codes. They run before an endpoint starts executing,
// so their failures are never stored against an idempotency key.
import { invalidRequest } from './api';
import type { FormParams, FormValue } from './form';

export function rejectUnknown(params: FormParams, allowed: readonly string[]): void {
  for (const name of Object.keys(params)) {
    if (!allowed.includes(name)) {
      throw invalidRequest(`Received unknown parameter: ${name}`, { code: 'parameter_unknown', param: name });
    }
  }
}

function scalar(params: FormParams, name: string): string | undefined {
  const value = params[name];
  if (value === undefined || typeof value === 'string') return value;
  throw invalidRequest(`Invalid ${name}: must be a string, not a hash or array`, { param: name });
}

export function requiredString(params: FormParams, name: string): string {
  const value = scalar(params, name);
  if (value === undefined)
    throw invalidRequest(`Missing required param: ${name}.`, { code: 'parameter_missing', param: name });
  if (value === '') {
    throw invalidRequest(
      `You passed an empty string for '${name}'. We assume empty values are an attempt to unset a parameter; ` +
        `however '${name}' cannot be unset. You should remove '${name}' from your request or supply a non-empty value.`,
      { code: 'parameter_invalid_empty', param: name },
    );
  }
  return value;
}

export function optionalString(params: FormParams, name: string): string | undefined {
  const value = scalar(params, name);
  return value === '' ? undefined : value;
}

export function optionalInteger(params: FormParams, name: string): number | undefined {
  const value = optionalString(params, name);
  if (value === undefined) return undefined;
  if (!/^-?\d{1,15}$/.test(value))
    throw invalidRequest(`Invalid integer: ${value}`, { code: 'parameter_invalid_integer', param: name });
  return Number(value);
}

export function optionalBoolean(params: FormParams, name: string): boolean | undefined {
  const value = optionalString(params, name);
  if (value === undefined) return undefined;
  if (value !== 'true' && value !== 'false') throw invalidRequest(`Invalid boolean: ${value}`, { param: name });
  return value === 'true';
}

export function optionalEnum<T extends string>(params: FormParams, name: string, allowed: readonly T[]): T | undefined {
  const value = optionalString(params, name);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) {
    throw invalidRequest(`Invalid ${name}: must be one of ${allowed.join(', ')}`, { param: name });
  }
  return value as T;
}

export function optionalHash(params: FormParams, name: string): FormParams | undefined {
  const value: FormValue | undefined = params[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'string' || Array.isArray(value))
    throw invalidRequest(`Invalid ${name}: must be a hash`, { param: name });
  return value;
}

export function optionalStringList(params: FormParams, name: string): string[] | undefined {
  const value = params[name];
  if (value === undefined || value === '') return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    throw invalidRequest(`Invalid array: ${name}`, { param: name });
  }
  return value as string[];
}

/** Stripe's limits: 50 keys, keys up to 40 characters, values up to 500; every value a string. */
export function metadataParam(params: FormParams): Record<string, string> {
  const hash = optionalHash(params, 'metadata') ?? {};
  const out: Record<string, string> = {};
  const keys = Object.keys(hash);
  if (keys.length > 50)
    throw invalidRequest('Invalid metadata: metadata can have at most 50 keys', { param: 'metadata' });
  for (const key of keys) {
    const value = hash[key];
    const param = `metadata[${key}]`;
    if (typeof value !== 'string') throw invalidRequest(`Invalid ${param}: must be a string`, { param });
    if (key.length > 40) throw invalidRequest(`Invalid ${param}: keys can be at most 40 characters`, { param });
    if (value.length > 500) throw invalidRequest(`Invalid ${param}: values can be at most 500 characters`, { param });
    // An empty value unsets a key in Stripe, so it is simply left out.
    if (value !== '') out[key] = value;
  }
  return out;
}
