// The program, run by test.sh from a fresh directory against the installed package.
import { Hindsight } from "hindsight-memory";
const hs = await Hindsight.open({ db: process.argv[2] });
const bank = hs.bank("agent");
await bank.retain([{ content: "pandas.read_csv needs encoding='utf-8-sig' for the vendor's CSV", kind: "procedural" },
                   { content: "The user wants PostgreSQL for every new service" }]);
const hits = await bank.recall({ query: "garbled headers when reading a CSV", k: 1 });
if (!hits.items[0].memory.content.includes("utf-8-sig")) throw new Error("wrong recall");
const task = await bank.beginTask({ goal: "clean the vendor CSV" });
await task.step({ type: "tool-call", tool: "python", text: "pd.read_csv('v.csv')" });
await task.fact("the vendor CSV starts with a BOM");
const end = await task.end({ outcome: "success", force: true });
console.log((await bank.stats()).active, end.method);
await hs.close();
