#!/usr/bin/env node
// Drives the pi builds the pi-peer harness installed (tests/support/sessiontree_pi.py
// passes its folder) for what the harness itself cannot do:
//
//   node sessiontree_pi_extras.mjs <pi-peer dir> gen <out.jsonl> [seed]
//       writes (with pi 1.x) a session with what only pi 1.x has: system messages,
//       context_edit and usage entries, a compaction that carries the system message, a
//       bashExecution message and a label cleared by omission;
//   node sessiontree_pi_extras.mjs <pi-peer dir> continue <file.jsonl> <legacy|latest>
//       opens the file in place, as pi does when it resumes a session, and appends one
//       user message and one assistant reply where pi resumes (its leaf).
//
// Prints {"file", "sessionId", "leafId", "entries", "appended"} as JSON.

import { existsSync, mkdtempSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [peerDir, command, fileArg, option] = process.argv.slice(2);
if (!peerDir || !["gen", "continue"].includes(command) || !fileArg) {
	console.error("usage: node sessiontree_pi_extras.mjs <pi-peer dir> gen <out.jsonl> [seed] | continue <file.jsonl> <legacy|latest>");
	process.exit(2);
}
const build = command === "continue" ? option : "latest";
const packageDir =
	build === "legacy"
		? join(peerDir, "node_modules", "@mariozechner", "pi-coding-agent")
		: join(peerDir, "latest", "node_modules", "@earendil-works", "pi-coding-agent");
// The session module alone (the 1.x package index needs Node 22; this file loads on Node 20).
const { SessionManager } = await import(pathToFileURL(join(packageDir, "dist", "core", "session-manager.js")).href);

let state = (Number.parseInt(command === "gen" ? (option ?? "1") : "7", 10) * 2654435761) >>> 0;
const next = () => {
	state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
	return state / 4294967296;
};
const pick = (n) => Math.floor(next() * n);
const words = "alpha beta gamma delta leaf branch tree node edit context token cost".split(" ");
const say = (n) => Array.from({ length: n }, () => words[pick(words.length)]).join(" ");
let clock = Date.UTC(2026, 2, 1, 10, 0, 0);
const tick = () => (clock += 500 + pick(3000));
let calls = 0;

const usage = () => {
	const input = 100 + pick(2000);
	const output = 10 + pick(500);
	const cost = { input: input * 3e-6, output: output * 15e-6, cacheRead: 0, cacheWrite: 0 };
	return { input, output, cacheRead: 0, cacheWrite: 0, totalTokens: input + output, cost: { ...cost, total: cost.input + cost.output } };
};
const user = (text) => ({ role: "user", content: [{ type: "text", text: text ?? say(6 + pick(6)) }], timestamp: tick() });
const assistant = (toolCall) => {
	const content = [{ type: "text", text: say(5 + pick(10)) }];
	const id = `call_${++calls}`;
	if (toolCall) content.push({ type: "toolCall", id, name: "read", arguments: { path: `src/${words[pick(words.length)]}.ts` } });
	const msg = { role: "assistant", content, api: "anthropic-messages", provider: "anthropic", model: "claude-sonnet-4-5", usage: usage(), stopReason: toolCall ? "toolUse" : "stop", timestamp: tick() };
	return { msg, id };
};
const toolResult = (id) => ({ role: "toolResult", toolCallId: id, toolName: "read", content: [{ type: "text", text: say(8) }], isError: false, timestamp: tick() });

function turn(sm, text) {
	const u = sm.appendMessage(user(text));
	const a = assistant(true);
	const a1 = sm.appendMessage(a.msg);
	const r = sm.appendMessage(toolResult(a.id));
	const a2 = sm.appendMessage(assistant(false).msg);
	return { user: u, assistantTool: a1, toolResult: r, assistant: a2 };
}

if (command === "continue") {
	const file = resolve(fileArg);
	const sm = SessionManager.open(file, dirname(file));
	const appended = [sm.appendMessage(user("Continuing in pi.")), sm.appendMessage(assistant(false).msg)];
	process.stdout.write(`${JSON.stringify({ file, sessionId: sm.getSessionId(), leafId: sm.getLeafId(), entries: sm.getEntries().length, appended })}\n`);
	process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), "sessiontree-pi-extras-"));
const sm = SessionManager.create("/home/user/project", dir);
sm.appendModelChange("anthropic", "claude-sonnet-4-5");
sm.appendThinkingLevelChange("medium");
sm.appendMessage({ role: "system", content: "You are a careful coding agent.", sections: { rules: say(4) }, timestamp: tick() });
const t1 = turn(sm, "Start with the parser.");
sm.appendMessage({ role: "bashExecution", command: "ls src", output: "a.ts\nb.ts", exitCode: 0, cancelled: false, truncated: false, timestamp: tick() });
sm.appendContextEdit(t1.user, { content: "Start with the parser (edited)." });
sm.appendContextEdit(t1.toolResult, null);
sm.appendContextEdit(t1.assistant, { content: "A shorter answer." });
sm.appendUsage("cache_warm", "anthropic", "claude-sonnet-4-5", usage(), "warming the cache");
const t2 = turn(sm);
sm.appendMessage({ role: "system", content: "", sections: { rules: say(3), style: "terse" }, timestamp: tick() });
const t3 = turn(sm);
sm.appendContextEdit(t2.assistant, { content: [{ type: "text", text: "Edited before the compaction." }] });
sm.appendCompaction(`## Goal\n${say(8)}`, t2.user, 12345, { readFiles: ["src/a.ts"], modifiedFiles: [] }, false);
const note = sm.appendCustomMessageEntry("extras/note", "Remember the tests.", true, { n: 1 });
sm.appendContextEdit(t3.user, { content: [{ type: "text", text: "Edited after the compaction." }] });
sm.appendContextEdit(note, { content: "Remember the tests (edited)." });
turn(sm);
sm.appendLabelChange(t3.user, "kept");
sm.appendLabelChange(t2.user, "cleared");
sm.appendLabelChange(t2.user);
sm.appendSessionInfo("Extras sample");

const written = sm.getSessionFile();
const out = resolve(fileArg);
if (existsSync(out)) throw new Error(`refusing to overwrite ${out}`);
renameSync(written, out);
process.stdout.write(`${JSON.stringify({ file: out, sessionId: sm.getSessionId(), leafId: sm.getLeafId(), entries: sm.getEntries().length })}\n`);
