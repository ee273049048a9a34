import { cleanup, configure } from '@testing-library/react';
import { afterEach } from 'vitest';

// Testing Library only cleans up by itself when test globals are on; they are off in this workspace.
afterEach(cleanup);

// findBy*/waitFor wait for renders that the live stream triggers outside act(); their 1 s default is a deadline a
// loaded 2-core CI machine can miss on a cold first render. They return as soon as the condition holds.
configure({ asyncUtilTimeout: 10_000 });
