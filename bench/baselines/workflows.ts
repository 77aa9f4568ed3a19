/**
 * The benchmark's own workflows, bundled together for the baselines' worker. Baselines (b) and (c)
 * share the bundle: what (b) adds to it is a few hundred bytes next to the SDK's own workflow code.
 */
export { floorWorkflow } from './floor-workflow.js';
export { pollByRetryWorkflow } from './retry-workflow.js';
