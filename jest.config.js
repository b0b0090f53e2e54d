// Jest in ESM mode (client-node is ESM-only): ts-jest compiles TypeScript as ES modules; the
// `.js` it rewrites relative `.ts` imports to is mapped back to the `.ts` source.
// Run through `node --experimental-vm-modules` (see package.json scripts).

const esm = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }] },
  // Global set-up runs in Node itself, which strips the types; compiled by ts-jest its `.ts`
  // imports would be rewritten to `.js` files that do not exist.
  transformIgnorePatterns: ['/node_modules/', '/jest-global-(setup|teardown)\\.ts$'],
};

/** @type {import('jest').Config} */
export default {
  projects: [
    { ...esm, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...esm,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/env/jest-global-setup.ts',
      globalTeardown: '<rootDir>/test/env/jest-global-teardown.ts',
      setupFilesAfterEnv: [
        '<rootDir>/test/env/jest-timeout.ts',
        '<rootDir>/test/env/jest-suite-lock.ts',
      ],
    },
  ],
};
