// `node --import ./test/helpers/ts-register.mjs src/main.ts`: the gateway from its
// sources. Worker threads inherit the flag, so edge threads run the sources too.
import * as module from 'node:module';

if (typeof module.registerHooks === 'function') {
  const hooks = await import('./ts-hooks.mjs');
  module.registerHooks({ resolve: hooks.resolve, load: hooks.load });
} else {
  module.register('./ts-hooks.mjs', import.meta.url);
}
