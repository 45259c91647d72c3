// Preloaded (--import) into a Node process by bench:profile: a CPU profile of its main
// thread over a window the benchmark chooses. The first SIGUSR2 starts V8's sampling
// profiler, the next stops it and writes the profile to PROFILE_FILE (.cpuprofile JSON).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const session = new Session();
session.connect();
const post = (method, params = {}) =>
  new Promise((resolve, reject) => session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
const interval = Number(process.env.PROFILE_INTERVAL_US ?? 100);
let running = false;
process.on('SIGUSR2', async () => {
  if (!running) {
    running = true;
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval });
    await post('Profiler.start');
    return;
  }
  running = false;
  const { profile } = await post('Profiler.stop');
  writeFileSync(process.env.PROFILE_FILE, JSON.stringify(profile));
});
