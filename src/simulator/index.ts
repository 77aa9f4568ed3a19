/**
 * A local simulator of the Background Agent Job API, for tests, the demo and the benchmark. A separate
 * program: nothing in the worker's import graph reaches it, and it does not use the API client.
 */
export {
  startSimulator,
  type RunningSimulator,
  type SimulatorOptions,
  type SimulatorStats,
} from './server.js';
export {
  DEFAULT_SCENARIO,
  parseScenario,
  parseScenarioMap,
  type Endpoint,
  type FaultAction,
  type FaultMatch,
  type FaultRule,
  type Faults,
  type RetryAfterSpec,
  type Scenario,
} from './scenario.js';
export type { JobRequests, JobStats, SimulatedRecord } from './jobs.js';
