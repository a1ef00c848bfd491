// A second process: opens the SQLite file another process wrote and prints what it recalls.
import { Hindsight } from '../src/index.js';
import { recallAll, scenario } from './scenario.js';

const hs = await Hindsight.open({ db: process.argv[2], llm: null });
process.stdout.write(JSON.stringify({ stats: hs.bank(scenario.bank).stats(), queries: recallAll(hs.bank(scenario.bank)) }));
hs.close();
