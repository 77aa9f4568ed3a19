// Lint rules that catch the mistakes that hurt a Temporal worker most: a promise nobody awaits
// (a lost activity call or an unhandled rejection) and a Node module inside workflow code (which
// breaks determinism and fails the workflow bundle at runtime).
import { builtinModules } from 'node:module';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((name) => `node:${name}`)];

export default tseslint.config(
  { ignores: ['lib/', 'dist/', 'node_modules/', 'bench/results/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.js', 'dev/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // node:test's test() and describe() return promises that the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['test', 'describe', 'it', 'suite'], package: 'node:test' },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  {
    // The API client stands alone: plain HTTP and records, no Temporal.
    files: ['src/agent-api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@temporalio/*', '../*', '!../errors.js', '!../failure-policy/'],
              message:
                'src/agent-api/ knows nothing of Temporal or the rest of the project (but the errors base, src/errors.ts, and the failure policy, src/failure-policy/).',
            },
          ],
        },
      ],
    },
  },
  {
    // What a failure means is pure and read by everything, workflow code included: it imports
    // nothing but its own files.
    files: ['src/failure-policy/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins,
          patterns: [
            {
              group: ['../*', '@temporalio/*', 'undici'],
              message: 'src/failure-policy/ is pure and the lowest layer: it imports only its own files.',
            },
          ],
        },
      ],
    },
  },
  {
    files: [
      'src/workflows/**/*.ts',
      'src/contract.ts',
      'src/escape.ts',
      'src/errors.ts',
      'src/input.ts',
      'src/nexus/service.ts',
      'examples/**/workflows.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({
            name,
            message:
              'Workflow code must be deterministic: no Node built-in modules in src/workflows/, the contract, src/escape.ts, src/errors.ts, src/input.ts or the Nexus service definition.',
          })),
          patterns: [
            {
              group: ['undici', '**/agent-api/*', '!**/agent-api/types.js', '**/simulator/**'],
              message:
                'Workflows reach the API through activities only (they may read its types, and src/failure-policy/).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['eslint.config.js', 'dev/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { process: 'readonly' } },
  },
);
