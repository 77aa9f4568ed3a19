/**
 * The per-project view without a server: the bounded `project` label, and the Grafana dashboard
 * against the metrics that src/observability/project-metrics.ts writes. (Whether its queries return
 * data from a real worker through a real Prometheus: project-metrics.test.ts.)
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { HISTOGRAM_BUCKETS, METRICS } from '../../src/observability/metrics.js';
import { OTHER_PROJECTS, ProjectLabels } from '../../src/observability/project-metrics.js';

const PROJECT_METRICS = Object.keys(METRICS).filter((name) => name.startsWith('agent_project_'));

describe('ProjectLabels', () => {
  test('keeps the first projects as themselves, and labels every later one _other', () => {
    const labels = new ProjectLabels(2);
    assert.equal(labels.label('docs'), 'docs');
    assert.equal(labels.label('site'), 'site');
    assert.equal(labels.label('blog'), OTHER_PROJECTS);
    assert.equal(labels.label('wiki'), OTHER_PROJECTS);
  });

  test('a known project keeps its own label after the cap is reached', () => {
    const labels = new ProjectLabels(1);
    assert.equal(labels.label('docs'), 'docs');
    assert.equal(labels.label('blog'), OTHER_PROJECTS);
    assert.equal(labels.label('docs'), 'docs');
  });

  test('cuts a long project ID to 64 bytes of UTF-8 without splitting a character', () => {
    const labels = new ProjectLabels(10);
    const long = `${'é'.repeat(40)}-tail`; // 80 bytes before the tail
    const label = labels.label(long);
    assert.ok(Buffer.byteLength(label) <= 64);
    assert.equal(label, 'é'.repeat(32));
    assert.equal(labels.label(long), label);
  });

  test('0 keeps no project of its own', () => {
    assert.equal(new ProjectLabels(0).label('docs'), OTHER_PROJECTS);
  });
});

/** The dashboard as a reader of its JSON sees it. */
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: { expr: string; refId: string }[];
}
const dashboard = JSON.parse(
  readFileSync(new URL('../../deploy/grafana/agent-jobs-per-project.json', import.meta.url), 'utf8'),
) as {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; query: { query: string } }[] };
};
const graphs = dashboard.panels.filter((panel) => panel.type !== 'row');
const queries = graphs.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr));

/** The series names a PromQL expression reads: identifiers followed by `{` (every query filters by project). */
const seriesIn = (expr: string) => [...expr.matchAll(/([a-z_:][a-z0-9_:]*)\{/g)].map((m) => m[1] as string);

describe('deploy/grafana/agent-jobs-per-project.json', () => {
  test('reads only series the workers write (counters with _total, histograms by _bucket)', () => {
    const written = new Set<string>();
    for (const name of PROJECT_METRICS) {
      written.add(name);
      written.add(`${name}_total`);
      for (const suffix of ['_bucket', '_sum', '_count']) written.add(`${name}${suffix}`);
    }
    assert.ok(queries.length >= 8);
    for (const expr of queries) {
      const series = seriesIn(expr);
      assert.ok(series.length > 0, `no series in ${expr}`);
      for (const name of series) assert.ok(written.has(name), `${name} (in ${expr}) is not written`);
    }
  });

  test('shows every per-project metric', () => {
    const read = new Set(queries.flatMap(seriesIn).map((name) => name.replace(/_(total|bucket)$/, '')));
    for (const name of PROJECT_METRICS) assert.ok(read.has(name), `${name} has no panel`);
  });

  test('filters every query by the project variable, and offers the projects the workers label', () => {
    for (const expr of queries) assert.match(expr, /\{project=~"\$project"\}/, expr);
    const variable = dashboard.templating.list.find((v) => v.name === 'project');
    assert.match(variable?.query.query ?? '', /agent_project_/);
  });

  test('quantiles come from histograms with buckets in seconds, not the exporter default in milliseconds', () => {
    for (const expr of queries.filter((q) => q.includes('histogram_quantile'))) {
      for (const name of seriesIn(expr)) {
        const buckets = HISTOGRAM_BUCKETS[name.replace(/_bucket$/, '')];
        assert.ok(buckets && buckets.length > 5, `${name} has no bucket override`);
      }
    }
  });

  test('panels have unique IDs, a title, and the one data source', () => {
    const ids = dashboard.panels.map((panel) => panel.id);
    assert.equal(new Set(ids).size, ids.length);
    for (const panel of graphs) {
      assert.ok(panel.title.length > 0);
      assert.equal(panel.datasource?.uid, 'prometheus', panel.title);
      assert.ok((panel.targets ?? []).length > 0, `${panel.title} has no query`);
    }
  });
});
