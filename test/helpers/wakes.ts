import type { Wake } from '../../src/capture/wake.js';

/** A wake summary for rules that read wakes (SLO, wake rules): a GET on route `payments`, 200, 5 ms. */
export const wakeRow = (over: Partial<Wake> & Pick<Wake, 'id' | 'captured_at'>): Wake => ({
  method: 'GET',
  path: '/p',
  route: 'payments',
  status: 200,
  latency_ms: 5,
  consumer: 'c',
  key_id: '',
  environment: 'production',
  region: 'local',
  request_bytes: 0,
  response_bytes: 0,
  client_ip: '',
  user_agent: '',
  ...over,
});
