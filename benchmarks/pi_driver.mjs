#!/usr/bin/env node
// The pi side of benchmarks/run.py: one measurement per process, one JSON object on stdout.
// It drives pi 1.6.0's published SessionManager from the peer harness (scripts/install-pi-peer.sh),
// loaded the way the harness loads it; no pi code is copied here.
//
//   node pi_driver.mjs HARNESS open FILE
//       SessionManager.open + buildSessionContext (wall ms; CPU ms of all the process's threads); RSS just before, peak RSS after (bytes).
//   node pi_driver.mjs HARNESS append FILE COUNT CTX_ITERS WARMUP
//       On FILE (a private copy the caller made): open, buildSessionContext, WARMUP untimed
//       appendMessage calls, COUNT timed ones, then CTX_ITERS rounds of appendMessage + timed
//       buildSessionContext. The messages are the file's own first message entries, cycled.
//   node pi_driver.mjs HARNESS api_append FOLDER COUNT
//       A new session in FOLDER: COUNT messages built as an app builds them (alternating user and
//       assistant with usage), each passed to appendMessage; the mean wall µs per entry.

import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

const [harness, command, file, ...rest] = process.argv.slice(2);

async function loadSessionManager() {
	const pkgDir = join(harness, "latest", "node_modules", "@earendil-works", "pi-coding-agent");
	const pkgJson = join(pkgDir, "package.json");
	if (!existsSync(pkgJson)) throw new Error(`pi 1.6.0 is not installed under ${harness}/latest`);
	const pkg = JSON.parse(readFileSync(pkgJson, "utf8"));
	// pi 1.x's package index needs Node 22; its session module alone loads on Node 20.
	const major = Number.parseInt(process.versions.node.split(".")[0], 10);
	const entry = major < 22 ? join(pkgDir, "dist", "core", "session-manager.js") : join(pkgDir, pkg.main ?? "dist/index.js");
	const mod = await import(pathToFileURL(entry).href);
	return { SessionManager: mod.SessionManager, version: pkg.version };
}

// Peak RSS in bytes: VmHWM on Linux (resourceUsage().maxRSS also counts the parent's peak at
// the fork that started this process), maxRSS elsewhere.
function maxRss() {
	try {
		const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
		if (line) return Number.parseInt(line.split(/\s+/)[1], 10) * 1024;
	} catch {}
	return process.resourceUsage().maxRSS * 1024;
}

function summary(samples) {
	const s = [...samples].sort((a, b) => a - b);
	const at = (q) => s[Math.max(0, Math.min(s.length - 1, Math.ceil(q * s.length) - 1))];
	const mean = s.reduce((a, b) => a + b, 0) / Math.max(1, s.length);
	const mid = s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
	return { p50: mid, p99: at(0.99), mean, n: s.length };
}

function firstMessages(path, count) {
	const found = [];
	for (const line of readFileSync(path, "utf8").split("\n")) {
		if (!line) continue;
		const obj = JSON.parse(line);
		if (obj.type === "message") found.push(obj.message);
		if (found.length === count) break;
	}
	return Array.from({ length: count }, (_, i) => structuredClone(found[i % found.length]));
}

async function main() {
	const { SessionManager, version } = await loadSessionManager();
	const out = { pi: version, node: process.version };
	if (command === "open") {
		out.rss_before = process.memoryUsage().rss;
		const c0 = process.cpuUsage();
		const t0 = performance.now();
		const sm = SessionManager.open(file, dirname(file));
		const t1 = performance.now();
		const ctx = sm.buildSessionContext();
		const t2 = performance.now();
		const cpu = process.cpuUsage(c0);
		Object.assign(out, {
			cpu_ms: (cpu.user + cpu.system) / 1000,
			open_ms: t1 - t0,
			ctx_ms: t2 - t1,
			total_ms: t2 - t0,
			entries: sm.getEntries().length,
			messages: ctx.messages.length,
			maxrss: maxRss(),
		});
	} else if (command === "append") {
		const [count, ctxIters, warmup] = rest.map((x) => Number.parseInt(x, 10));
		const messages = firstMessages(file, count + ctxIters + warmup);
		const sm = SessionManager.open(file, dirname(file));
		sm.buildSessionContext();
		let i = 0;
		for (; i < warmup; i++) sm.appendMessage(messages[i]);
		const samples = [];
		for (; i < warmup + count; i++) {
			const t0 = performance.now();
			sm.appendMessage(messages[i]);
			samples.push(performance.now() - t0);
		}
		const ctxSamples = [];
		for (; i < messages.length; i++) {
			sm.appendMessage(messages[i]);
			const t0 = performance.now();
			sm.buildSessionContext();
			ctxSamples.push(performance.now() - t0);
		}
		out.append = summary(samples);
		if (ctxSamples.length) out.ctx_after_append = summary(ctxSamples);
		out.maxrss = maxRss();
	} else if (command === "api_append") {
		// As an app appends: build the message objects, then appendMessage (bench_child.py api_append
		// builds the same content). FILE is the folder of the new session.
		const count = Number.parseInt(rest[0], 10);
		const filler = "the quick brown fox jumps over the lazy dog while the agent reads the file and plans. ";
		const sm = SessionManager.create("/home/me/project", file);
		const t0 = performance.now();
		for (let i = 0; i < count; i++) {
			const timestamp = Date.now();
			if (i % 2 === 0) {
				sm.appendMessage({ role: "user", content: [{ type: "text", text: `question ${i}: ${filler}` }], timestamp });
			} else {
				const usage = {
					input: 1000 + (i % 500), output: 200 + (i % 300), cacheRead: 5000, cacheWrite: 100,
					totalTokens: 6300 + (i % 500) + (i % 300),
					cost: { input: 0.003, output: 0.0045, cacheRead: 0.0015, cacheWrite: 0.000375, total: 0.009375 },
				};
				sm.appendMessage({
					role: "assistant", content: [{ type: "text", text: `answer ${i}: ${filler.repeat(4)}` }],
					provider: "anthropic", model: "claude-sonnet-4-5", api: "anthropic-messages", usage,
					stopReason: "stop", timestamp,
				});
			}
		}
		out.mean_us = ((performance.now() - t0) / count) * 1000;
		out.count = count;
		out.maxrss = maxRss();
	} else {
		throw new Error(`unknown command ${command}`);
	}
	process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err) => {
	console.error(`pi_driver: ${err?.stack ?? err}`);
	process.exit(1);
});
