#!/usr/bin/env node
// The `sabre` command's bin (package.json "bin"). It only picks which form of the command to
// load, and loads it: the one-file bundle, which starts in a fraction of the time, or the module
// graph it was linked from (./linked.ts says when). The command itself is ./run.ts. Nothing else
// is imported here (../core/linked.ts, which runs the bundle, imports only node builtins), so
// nothing is loaded twice.
import { pathToFileURL } from 'node:url';
import { runLinked } from '../core/linked.js';
import { cliScript } from './linked.js';

const script = cliScript();
// The bundle is CommonJS, run with its code cache (core/linked.ts); the graph is ES modules.
if (script.endsWith('.cjs')) runLinked(script);
else await import(pathToFileURL(script).href);
