/** The workflows this worker runs; `workflowsPath` and the prebuilt bundle point here. */
export { agentJobWorkflow } from './agent-job/workflow.js';
export { projectQuota } from './project-quota/workflow.js';
/** The quota protocol of earlier builds, frozen for their quota workflows and pinned jobs (./legacy-quota/). */
export { projectQuotaWorkflow } from './legacy-quota/workflow.js';
