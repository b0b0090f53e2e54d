// Integration tests wait on real processes (broker, API server, receivers): give each test and
// hook two minutes instead of jest's five seconds.
import { jest } from '@jest/globals';

jest.setTimeout(120_000);
