import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

export default tseslint.config(
  { ignores: ['lib/**', 'node_modules/**', '.data/**', 'coverage/**', '*.js', '*.mjs', '*.cjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflow code, and every module it imports, is replayed deterministically in a sandbox: no Node built-ins.
    files: [
      'src/workflows/**/*.ts',
      'src/compensations/**/*.ts',
      'src/contract/**/*.ts',
      'src/domain/**/*.ts',
      'src/reliability/{taxonomy,policy,policy-terms,attempt-ledger,redaction,default-policy,effect-of-record,verdict}.ts',
    ],
    rules: {
      'no-restricted-imports': ['error', { paths: [...builtinModules, ...builtinModules.map((m) => `node:${m}`)] }],
    },
  },
);
