import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
import { startEdgeThread } from './edge-root.js';
import type { EdgeData } from './protocol.js';

/** An edge thread's entry: its root (edge-root.ts), and what ends the thread. */
const data = workerData as EdgeData;
let thread: Awaited<ReturnType<typeof startEdgeThread>>;
try {
  thread = await startEdgeThread(data, parentPort as MessagePort);
} catch {
  // The control thread was told (`failed`) and starts no other.
  process.exit(1);
}
// A bug that reaches the top: every answered wake is written to this thread's log
// first, then the thread ends and the control thread starts another, which stores it.
process.on('uncaughtException', (e) => {
  thread.failed(e);
  process.exit(1);
});
