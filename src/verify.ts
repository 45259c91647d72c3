/**
 * `wakegate/verify`: signature checks for webhook receivers. It loads nothing but
 * node:crypto: no gateway, no storage engine.
 */
export { sign, signStandard, verifySignature } from './webhooks/signer.js';
