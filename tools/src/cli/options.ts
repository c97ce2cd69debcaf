// Option parsers the long-running commands (chaos, bench) share with commander.
import { InvalidArgumentError } from 'commander';

/** A whole number from min to max. */
export const wholeNumber =
  (min: number, max: number) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`);
    return n;
  };

/** Comma-separated whole numbers, each from min to max. */
export const wholeNumbers =
  (min: number, max: number) =>
  (v: string): number[] => {
    try {
      return v.split(',').map((x) => wholeNumber(min, max)(x.trim()));
    } catch {
      throw new InvalidArgumentError(`must be whole numbers from ${min} to ${max}, comma-separated`);
    }
  };
