/** The workflows this worker runs; `workflowsPath` and the prebuilt bundle point here. */
export { agentJobWorkflow } from './agent-job/workflow.js';
export { projectQuotaWorkflow } from '../quota/workflow.js';
