/** The benchmark's own workflows, bundled together for the baselines' worker. */
export { pollByRetryWorkflow } from './retry-workflow.js';
