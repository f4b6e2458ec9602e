/**
 * Parsers for flag values, shared by every command: a bad value is a UsageError (exit 2) naming the flag and what it
 * got, before any work starts.
 */
import { UsageError } from "../errors.js";

/** A repeatable flag: every occurrence, in order. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export const positiveInt = (flag: string) => (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive integer, got '${value}'`);
  return n;
};

export const integerAtLeast = (flag: string, min: number) => (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`${flag} must be an integer ≥ ${min}, got '${value}'`);
  return n;
};

export const nonNegativeInt = (flag: string) => integerAtLeast(flag, 0);

export const anyInteger = (flag: string) => (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new UsageError(`${flag} must be an integer, got '${value}'`);
  return n;
};

export const nonNegativeNumber = (flag: string) => (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0, got '${value}'`);
  return n;
};

export const probability = (flag: string) => (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0 || n > 1) throw new UsageError(`${flag} must be a number in [0, 1], got '${value}'`);
  return n;
};
