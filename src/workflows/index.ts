/** The workflows this worker runs; `workflowsPath` and the prebuilt bundle point here. */
export { agentJobWorkflow } from './agent-job/workflow.js';
export { projectQuota } from './project-quota/workflow.js';
/** The job-end notification, a child of an agent-job workflow started with `notify` (./job-end-notification/). */
export { jobEndNotification } from './job-end-notification/workflow.js';
