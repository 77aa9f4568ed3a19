/** Task-queue priority and fairness for a start (docs/starting-jobs.md). */
import { fitPart } from './ids.js';

/** The server's limit on a fairness key. */
const MAX_FAIRNESS_KEY_BYTES = 64;

/**
 * The task priority of a start: its class, and the project as the fairness key, so that within a
 * class one project's burst shares the workers instead of going first. Over 64 bytes, cut by fitPart.
 */
export function taskPriority(
  projectId: string,
  priorityKey: number,
): { priorityKey: number; fairnessKey: string } {
  return { priorityKey, fairnessKey: fitPart(projectId, projectId, MAX_FAIRNESS_KEY_BYTES) };
}
