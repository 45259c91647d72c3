#!/usr/bin/env node
import { hideKeyArg, KEY_WARNING } from './cli/hide-key.js';

// A key given with --key is overwritten in the command line before the commands'
// modules are even loaded (they take most of a second of CPU; node itself a tenth).
if (hideKeyArg()) process.stderr.write(`${KEY_WARNING}\n`);
await import('./run.js');
