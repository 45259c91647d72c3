import { BatchRefused } from '../capture/batcher.js';

/**
 * ClickHouse's answers that a batch's values cannot be taken, whatever the moment: a
 * value it cannot parse or hold. Never an answer about the server's state (memory,
 * parts, a table missing): those pass, and the batch is tried again.
 */
const DATA_ERRORS =
  /^(CANNOT_PARSE_\w+|INCORRECT_DATA|TYPE_MISMATCH|CANNOT_CONVERT_TYPE|VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE|TOO_LARGE_STRING_SIZE|CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN)$/;
/** The same answers as the embedded engine words them (its errors carry no code). */
const DATA_MESSAGES =
  /^(Code: (6|26|27|38|41|53|70|72|117|131|321|349)\. )?(DB::Exception: )?(Cannot parse|Type mismatch|Incorrect data|Cannot convert|Value .* is out of range|Too large string size)/;

/** True when storage's error says it will never take this batch's values. */
export function refusesValues(e: unknown): boolean {
  if (typeof e !== 'object' || e === null) return false;
  const { type, message } = e as { type?: unknown; message?: unknown };
  if (typeof type === 'string' && DATA_ERRORS.test(type)) return true;
  return typeof message === 'string' && DATA_MESSAGES.test(message);
}

/** Runs an insert; an error saying storage will never take its values becomes a BatchRefused. */
export async function refusalMarked<R>(insert: () => Promise<R>): Promise<R> {
  try {
    return await insert();
  } catch (e) {
    if (refusesValues(e)) throw new BatchRefused((e as Error).message, { cause: e });
    throw e;
  }
}
