#!/usr/bin/env node
// The `sabre` command's bin (package.json "bin"). It only picks which form of the command to
// load, and loads it: the one-file bundle, which starts in a fraction of the time, or the module
// graph it was linked from (./linked.ts says when). The command itself is ./run.ts. Nothing else
// is imported here, so nothing is loaded twice.
import { pathToFileURL } from 'node:url';
import { cliScript } from './linked.js';

await import(pathToFileURL(cliScript()).href);
