// INTERIM SHIM written by the lead while the quota rewrite is under way: overwrite this file freely.
import { ProjectQuotaRequester as Base } from './project-quota.js';
export class ProjectQuotaRequester extends Base {
  settle(): Promise<void> {
    return Promise.resolve();
  }
}
