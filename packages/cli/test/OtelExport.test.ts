/**
 * `otel export` against a receiver that is not ours (`otlpReceiver.ts`: the
 * OpenTelemetry JS SDK's protobuf decoder and the semantic conventions' own
 * names): a hooked Claude Code session, recorded through `Hook.handle` at known
 * times, arrives as one trace whose parents, times and GenAI attributes are the
 * ones the journal recorded; a collector that is down, refuses or never answers
 * loses spans, says so and ends with exit 7 within its timeout.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Entry } from "@session-journal/core"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import * as Spans from "../src/otel/Spans.ts"
import { SID, sub, T0, writeHooked } from "./hookedSession.ts"
import { hookedTree, listen, load, type Receiver } from "./otlpReceiver.ts"
import { cleanup, run, tempDir } from "./Run.ts"

const otlp = load()
const G = otlp.semconv

describe("otel export", () => {
  let dir = ""
  let session = ""
  let entries: ReadonlyArray<Entry.Entry> = []
  const receivers: Array<Receiver> = []
  beforeAll(async () => {
    dir = tempDir()
    const written = await writeHooked(dir)
    session = written.session
    entries = written.entries
  })
  afterAll(async () => {
    for (const r of receivers) await r.close()
    cleanup()
  })

  const exportTo = (url: string, ...more: Array<string>) =>
    run(["--dir", dir, "otel", "export", session, "--endpoint", url, ...more])

  it("sends one trace whose structure, times and names are the recorded ones", async () => {
    const receiver = await listen({ _tag: "accept" })
    receivers.push(receiver)
    const r = await exportTo(receiver.url)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, "6 of 6 spans delivered")
    assert.isAbove(receiver.requests.length, 0)
    for (const q of receiver.requests) {
      assert.strictEqual(q.path, "/v1/traces")
      assert.strictEqual(q.contentType, "application/x-protobuf")
    }
    const spans = receiver.requests.flatMap((q) => otlp.decode(new Uint8Array(q.body)))
    const at = (secs: number, ms = 0) => BigInt(T0 + secs) * 1_000_000_000n + BigInt(ms) * 1_000_000n

    // One trace; the session at its root; calls under their agent; the sub-agent under the Agent call.
    assert.strictEqual(new Set(spans.map((s) => s.traceId)).size, 1)
    const { agent, bash, read, root, subagent, write } = hookedTree(spans)

    // Times are the recorded ones: the tool entry to its outcome (Claude Code's duration_ms when given).
    assert.deepStrictEqual([root.start, root.end], [at(0), at(11)])
    assert.deepStrictEqual([bash.start, bash.end], [at(1), at(1, 1500)])
    assert.deepStrictEqual([agent.start, agent.end], [at(4), at(9)])
    assert.deepStrictEqual([subagent.start, subagent.end], [at(5), at(8)])
    assert.deepStrictEqual([read.start, read.end], [at(6), at(7)])
    assert.deepStrictEqual([write.start, write.end], [at(10), at(10)])

    // The conventions' own names (semconv of the pinned version).
    assert.strictEqual(otlp.semconvVersion, Spans.SEMCONV_VERSION)
    assert.strictEqual(
      root.attributes[G["ATTR_GEN_AI_OPERATION_NAME"] as string],
      G["GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT"]
    )
    assert.strictEqual(root.attributes[G["ATTR_GEN_AI_CONVERSATION_ID"] as string], SID)
    assert.strictEqual(root.attributes[G["ATTR_GEN_AI_AGENT_NAME"] as string], "claude-code")
    assert.strictEqual(subagent.attributes[G["ATTR_GEN_AI_AGENT_ID"] as string], sub.agent_id)
    assert.strictEqual(subagent.attributes[G["ATTR_GEN_AI_AGENT_NAME"] as string], sub.agent_type)
    for (const [span, tool, id] of [[bash, "Bash", "toolu_bash"], [read, "Read", "toolu_read"]] as const) {
      assert.strictEqual(
        span.attributes[G["ATTR_GEN_AI_OPERATION_NAME"] as string],
        G["GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL"]
      )
      assert.strictEqual(span.attributes[G["ATTR_GEN_AI_TOOL_NAME"] as string], tool)
      assert.strictEqual(span.attributes[G["ATTR_GEN_AI_TOOL_CALL_ID"] as string], id)
      assert.strictEqual(span.status.code, 1) // Ok
    }
    const known = new Set(Object.entries(G).filter(([k]) => k.startsWith("ATTR_")).map(([, v]) => v))
    for (const s of spans) {
      for (const key of Object.keys(s.attributes)) {
        if (key.startsWith("gen_ai.") || key === "error.type") {
          assert.isTrue(known.has(key), `${key} is a convention's name`)
        }
      }
      // A verdict is an evaluation result; an error status comes with the tracer's `exception` event.
      for (const e of s.events) {
        assert.include([G["EVENT_GEN_AI_EVALUATION_RESULT"], "exception"], e.name)
        for (const key of Object.keys(e.attributes)) {
          if (key.startsWith("gen_ai.")) assert.isTrue(known.has(key), `${key} is a convention's name`)
        }
      }
    }

    // Each guard verdict is an evaluation result; the denied call is an error saying who denied it and why.
    const verdict = write.events.find((e) => e.name === G["EVENT_GEN_AI_EVALUATION_RESULT"])!
    assert.strictEqual(verdict.attributes[G["ATTR_GEN_AI_EVALUATION_SCORE_LABEL"] as string], "deny")
    assert.isString(verdict.attributes[G["ATTR_GEN_AI_EVALUATION_NAME"] as string])
    assert.isString(verdict.attributes[G["ATTR_GEN_AI_EVALUATION_EXPLANATION"] as string])
    assert.strictEqual(write.status.code, 2)
    assert.include(write.status.message, "denied by")
    assert.strictEqual(
      bash.events.find((e) => e.name === G["EVENT_GEN_AI_EVALUATION_RESULT"])!.attributes[
        G["ATTR_GEN_AI_EVALUATION_SCORE_LABEL"] as string
      ],
      "allow"
    )

    // Every span points at its proof: the journal session and the entry's sequence and hash.
    const bySeq = new Map(entries.map((e) => [e.sequence, e]))
    for (const s of spans) {
      assert.strictEqual(s.attributes["session_journal.session.id"], session)
      const entry = bySeq.get(s.attributes["session_journal.entry.sequence"] as number)!
      assert.strictEqual(s.attributes["session_journal.entry.hash"], entry.entry_hash)
      assert.strictEqual(s.start, BigInt(entry.timestamp_secs) * 1_000_000_000n)
    }
    const bashEntry = bySeq.get(bash.attributes["session_journal.entry.sequence"] as number)!
    assert.strictEqual(bashEntry.kind, "tool")
    const outcome = bySeq.get(bash.attributes["session_journal.outcome.sequence"] as number)!
    assert.strictEqual(outcome.kind, "tool.outcome")
    assert.strictEqual(bash.attributes["session_journal.outcome.hash"], outcome.entry_hash)
  })

  it("Claude Code's own session id finds its hooked session", async () => {
    const receiver = await listen({ _tag: "accept" })
    receivers.push(receiver)
    const r = await run(["--dir", dir, "otel", "export", SID, "--endpoint", receiver.url])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, `${session}: 6 spans`)
  })

  it("sends OTLP/JSON when asked, to the traces URL the variables give", async () => {
    const receiver = await listen({ _tag: "accept" })
    receivers.push(receiver)
    const r = await run(["--dir", dir, "--json", "otel", "export", session], {
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/custom/traces`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json"
      }
    })
    assert.strictEqual(r.code, 0, r.stderr)
    const doc = JSON.parse(r.stdout) as { spans: number; delivered: number; lost: number }
    assert.deepStrictEqual([doc.spans, doc.delivered, doc.lost], [6, 6, 0])
    assert.strictEqual(receiver.requests[0]!.path, "/custom/traces")
    assert.strictEqual(receiver.requests[0]!.contentType, "application/json")
    const body = JSON.parse(receiver.requests[0]!.body.toString("utf8")) as {
      resourceSpans: Array<{
        resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> }
        scopeSpans: Array<{ scope: { name: string }; schemaUrl: string; spans: Array<unknown> }>
      }>
    }
    const [resource] = body.resourceSpans
    assert.strictEqual(resource!.scopeSpans[0]!.spans.length, 6)
    // The scope is ours, and its schema names the conventions' version the attributes follow.
    assert.strictEqual(resource!.scopeSpans[0]!.scope.name, "session-journal")
    assert.strictEqual(resource!.scopeSpans[0]!.schemaUrl, `https://opentelemetry.io/schemas/${otlp.semconvVersion}`)
    assert.strictEqual(
      resource!.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue,
      "session-journal"
    )
  })

  it("a collector that is down loses spans, never entries, and says so (exit 7)", async () => {
    const receiver = await listen({ _tag: "accept" })
    const url = receiver.url
    await receiver.close() // nothing listens there now
    const before = fs.readdirSync(path.join(dir)).sort()
    const r = await exportTo(url, "--timeout", "20s")
    assert.strictEqual(r.code, 7, r.stderr)
    assert.include(r.stdout, "0 of 6 spans delivered")
    assert.match(r.stderr, /6 of 6 spans did not reach .*the journal is unchanged/)
    assert.deepStrictEqual(fs.readdirSync(path.join(dir)).sort(), before)
    const verify = await run(["--dir", dir, "verify", session])
    assert.strictEqual(verify.code, 0, verify.stderr)
  })

  it("a collector that refuses loses the spans and says what it answered", async () => {
    const receiver = await listen({ _tag: "refuse", status: 400 })
    receivers.push(receiver)
    const r = await exportTo(receiver.url)
    assert.strictEqual(r.code, 7, r.stderr)
    assert.include(r.stderr, "400")
  })

  it("a collector that never answers: the command ends within its timeout and reports the spans lost", async () => {
    const receiver = await listen({ _tag: "hang" })
    receivers.push(receiver)
    const r = await exportTo(receiver.url, "--timeout", "1s")
    assert.strictEqual(r.code, 7, r.stderr)
    assert.include(r.stderr, "no answer within")
  })

  it("refuses a missing or malformed endpoint as usage (exit 2)", async () => {
    const none = await run(["--dir", dir, "otel", "export", session], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "" }
    })
    assert.strictEqual(none.code, 2, none.stderr)
    const bad = await exportTo("not a url")
    assert.strictEqual(bad.code, 2, bad.stderr)
    const header = await exportTo("http://127.0.0.1:9", "--header", "novalue")
    assert.strictEqual(header.code, 2, header.stderr)
  })

  it("sends only what verified: a denied call edited to look allowed, and all after it, are left out and counted", async () => {
    const receiver = await listen({ _tag: "accept" })
    receivers.push(receiver)
    const tampered = tempDir()
    const { session: id } = await writeHooked(tampered)
    const segment = fs.readdirSync(path.join(tampered, id)).filter((n) => /^[0-9]{20}\.jsonl$/.test(n)).sort()[0]!
    const file = path.join(tampered, id, segment)
    // Edited in place, the same length (segments are preallocated): the denied Write now says allowed.
    const text = fs.readFileSync(file, "latin1")
    const line = text.split("\n").find((l) => l.includes(`"tool_name":"Write"`) && l.includes(`"kind":"tool"`))!
    const row = JSON.parse(line) as { e: { sequence: number; allowed: boolean } }
    assert.isFalse(row.e.allowed)
    fs.writeFileSync(file, text.replace(line, line.replace(`"allowed":false`, `"allowed":true `)), "latin1")
    const r = await run(["--dir", tampered, "--json", "otel", "export", id, "--endpoint", receiver.url])
    assert.strictEqual(r.code, 0, r.stderr)
    const doc = JSON.parse(r.stdout) as {
      sessions: Array<{ entries: number; unverified: number; unverified_from: number }>
    }
    assert.strictEqual(doc.sessions[0]!.unverified_from, row.e.sequence)
    assert.strictEqual(doc.sessions[0]!.entries, row.e.sequence)
    assert.isAbove(doc.sessions[0]!.unverified, 0)
    const spans = receiver.requests.flatMap((q) => otlp.decode(new Uint8Array(q.body)))
    assert.isUndefined(spans.find((s) => s.name === "execute_tool Write"), "the edited call is not sent")
    for (const s of spans) assert.isBelow(s.attributes["session_journal.entry.sequence"] as number, row.e.sequence)
  })
})
