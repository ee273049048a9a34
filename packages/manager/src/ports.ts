// The free-port helpers live beside the process launcher in sglang-engine; kept here for manager's own imports.
export { freePort, freePorts } from '@uis/sglang-engine';
