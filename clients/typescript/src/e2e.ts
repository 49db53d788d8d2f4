// End-to-end check of the generated TypeScript client against a live `engram serve`.
//
// ENGRAM_URL (e.g. http://127.0.0.1:8080) and ENGRAM_API_KEY (when the service has keys)
// come from the environment. Everything is stored in a fresh namespace, so the script can
// run against a service that holds other data. Prints each check; exits 1 if any fails.

import { randomBytes } from "node:crypto";

import createClient from "openapi-fetch";

import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
type Facet = Schemas["Facet"];
type Filter = Schemas["Filter"];
type Hit = Schemas["Hit"];
type ItemKind = Schemas["ItemKind"];
type SourceKind = Schemas["SourceKind"];
type StoreItem = Schemas["StoreItem"];
type ErrorEnvelope = Schemas["ErrorEnvelope"];

const ITEM_KINDS: readonly ItemKind[] = ["document", "conversation", "learning"];
const SOURCE_KINDS: readonly SourceKind[] = ["folder", "file", "conversation", "agent", "import"];

let passed = 0;
let failed = 0;

function check(ok: boolean, what: string, detail?: unknown): void {
  if (ok) {
    passed += 1;
    console.log(`ok    ${what}`);
  } else {
    failed += 1;
    console.log(`FAIL  ${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
  }
}

class Stop extends Error {}

/** The answer of a call that must succeed; anything else stops the run. */
async function ok<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>, what: string): Promise<T> {
  const { data, error, response } = await call;
  if (data === undefined) {
    check(false, what, { status: response.status, error });
    throw new Stop(what);
  }
  return data;
}

/** The typed envelope of a call that must fail with `status`. */
async function refused(
  call: Promise<{ data?: unknown; error?: ErrorEnvelope; response: Response }>,
  status: number,
  what: string,
): Promise<ErrorEnvelope> {
  const { data, error, response } = await call;
  if (error === undefined) {
    check(false, what, { status: response.status, data });
    throw new Stop(what);
  }
  check(response.status === status, `${what}: HTTP ${status}`, response.status);
  check(error.request_id === response.headers.get("x-request-id"), `${what}: request_id equals X-Request-ID`);
  check(error.message.startsWith(error.code.replaceAll("_", " ") + ":"), `${what}: message starts with its code`);
  return error;
}

function isOneOf<T extends string>(values: readonly T[], value: string): value is T {
  return (values as readonly string[]).includes(value);
}

/** A bucket turned back into the filter that selects it (contract §6). */
function narrow(facet: Facet, value: string): Filter {
  switch (facet) {
    case "kind":
      if (!isOneOf(ITEM_KINDS, value)) throw new Error(`unknown kind ${value}`);
      return { kinds: [value] };
    case "source":
      if (!isOneOf(SOURCE_KINDS, value)) throw new Error(`unknown source kind ${value}`);
      return { sources: [value] };
    case "tag":
      return { tags_any: [value] };
    case "thread":
      return { thread_id: value };
    case "agent":
      return { agent_id: value };
    case "namespace":
      return { reach: { at: value, inherit: false, descendants: false } };
    case "source_id":
    case "workspace":
    case "folder":
    case "file_path":
    case "language":
    case "repo":
    case "url":
    case "tool_call":
      return { [facet]: value };
    case "observed_year":
    case "observed_month":
    case "observed_day":
    case "observed_hour": {
      // A time bucket is named by the UTC instant it starts at; it ends one unit later.
      const end = new Date(value);
      if (facet === "observed_year") end.setUTCFullYear(end.getUTCFullYear() + 1);
      else if (facet === "observed_month") end.setUTCMonth(end.getUTCMonth() + 1);
      else if (facet === "observed_day") end.setUTCDate(end.getUTCDate() + 1);
      else end.setUTCHours(end.getUTCHours() + 1);
      return { observed_after: value, observed_before: end.toISOString() };
    }
    default: {
      const unreachable: never = facet;
      throw new Error(`unknown facet ${String(unreachable)}`);
    }
  }
}

function requireEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} must be set`);
  return value;
}

async function main(): Promise<void> {
  const baseUrl = requireEnv("ENGRAM_URL");
  const apiKey = process.env["ENGRAM_API_KEY"] ?? "";
  const api = createClient<paths>({ baseUrl, headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} });

  const namespace = `project:ts-${randomBytes(6).toString("hex")}`;
  const reach = { at: namespace, inherit: false, descendants: false };
  const scope: Filter = { reach };
  console.log(`engram at ${baseUrl}, namespace ${namespace}`);

  // The engine and its health.
  const engine = await ok(api.GET("/v1/engine"), "engine");
  check(engine.fetch_modes.length > 0, `engine ${engine.id} lists fetch modes ${engine.fetch_modes.join(", ")}`);
  const health = await ok(api.GET("/v1/health"), "health");
  check(health.state === "ok", "health is ok", health);
  const catalogue = await ok(api.GET("/v1/errors"), "errors");
  check(
    catalogue.errors.some((e) => e.code === "invalid_request" && e.http_status === 400),
    "error catalogue lists invalid_request",
  );

  // One item of each kind.
  const document: StoreItem = {
    type: "document",
    title: "Rust ownership",
    body: { text: "Ownership moves values; borrowing lends them without a move." },
    mime: "text/markdown",
    meta: {
      namespace,
      folder: "/repo/src",
      file_path: "/repo/src/lib.rs",
      language: "rust",
      tags: ["e2e", "rust"],
      source: { kind: "file", id: "lib.rs" },
    },
  };
  const conversation: StoreItem = {
    type: "conversation",
    turns: [
      { role: "user", text: "Which editor settings do I use?" },
      { role: "assistant", text: "Tabs, width four.", tool_calls: [{ name: "read_config", id: "call-1" }] },
    ],
    meta: { namespace, thread_id: "t-42", tags: ["e2e"], source: { kind: "conversation", id: "t-42" } },
  };
  const learning: StoreItem = {
    type: "learning",
    text: "prefers tabs over spaces",
    kind: "preference",
    confidence: 0.8,
    evidence: "said so in thread t-42",
    meta: { namespace, tags: ["e2e", "style"], observed_at: "2026-01-02T03:04:05+01:00" },
  };
  const stored = { document: "", conversation: "", learning: "" };
  for (const item of [document, conversation, learning]) {
    const { data, response } = await api.POST("/v1/store", { body: item });
    check(response.status === 201 && data?.replayed === false, `store ${item.type}: 201, not replayed`, data);
    check(/^[0-9a-f]{40}$/.test(data?.id ?? ""), `store ${item.type}: id is 40 hex characters`, data?.id);
    stored[item.type] = data?.id ?? "";
  }
  const again = await api.POST("/v1/store", { body: learning });
  check(
    again.response.status === 200 && again.data?.replayed === true && again.data.id === stored.learning,
    "store the learning again: 200, replayed, same id",
    again.data,
  );
  // null in a request means unset: the same learning with every unset field sent as null.
  const withNulls: StoreItem = { ...learning, meta: { ...learning.meta, workspace: null, source: null, turns: null } };
  const nulls = await api.POST("/v1/store", { body: withNulls });
  check(
    nulls.response.status === 200 && nulls.data?.replayed === true && nulls.data.id === stored.learning,
    "store the learning with unset fields as null: the same item, replayed",
    nulls.data,
  );

  // store_many: four learnings and a repeat of the document.
  const batch: StoreItem[] = [1, 2, 3, 4].map((n) => ({
    type: "learning",
    text: `batch fact ${n}: the build runs cargo test ${n} times`,
    kind: "fact",
    confidence: 0.5,
    meta: { namespace, tags: ["batch"] },
  }));
  const many = await ok(api.POST("/v1/store_many", { body: { items: [...batch, document] } }), "store_many");
  check(many.receipts.length === 5, "store_many: one receipt per item", many.receipts.length);
  check(
    many.receipts.slice(0, 4).every((r) => !r.replayed),
    "store_many: new items are written",
  );
  const last = many.receipts[4];
  check(last?.replayed === true && last.id === stored.document, "store_many: the repeated document is a replay");
  const batchIds = many.receipts.slice(0, 4).map((r) => r.id);
  const everyId = new Set([stored.document, stored.conversation, stored.learning, ...batchIds]);

  // fetch in every mode the engine lists.
  const expected: Record<Schemas["FetchMode"], number> = { keyword: 2, vector: everyId.size, hybrid: everyId.size };
  for (const mode of engine.fetch_modes) {
    const page = await ok(api.POST("/v1/fetch", { body: { query: "tabs", mode, filter: scope, limit: 10 } }), mode);
    const ids = page.hits.map((h) => h.id);
    check(page.hits.length === expected[mode], `fetch ${mode}: ${expected[mode]} hits`, ids.length);
    check(ids.every((id) => everyId.has(id)), `fetch ${mode}: every hit is in the namespace`);
    check(
      page.hits.every((h, i) => i === 0 || (page.hits[i - 1]?.score ?? 0) >= h.score),
      `fetch ${mode}: best first`,
    );
    const hit = page.hits.find((h) => h.id === stored.learning);
    check(hit?.kind === "learning" && hit.confidence === 0.8, `fetch ${mode}: the learning with confidence 0.8`, hit);
    check(page.next_cursor === undefined, `fetch ${mode}: a single page has no next_cursor`);
  }
  const mode = engine.fetch_modes.includes("vector") ? "vector" : engine.fetch_modes[0];
  if (mode !== undefined) {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const body = { query: "editor settings", mode, filter: scope, limit: 3, ...(cursor ? { cursor } : {}) };
      const page: Schemas["FetchPage"] = await ok(api.POST("/v1/fetch", { body }), `fetch ${mode} page`);
      seen.push(...page.hits.map((h) => h.id));
      cursor = page.next_cursor;
      pages += 1;
    } while (cursor !== undefined && pages < 20);
    check(
      new Set(seen).size === seen.length && (mode !== "vector" || seen.length === everyId.size),
      `fetch ${mode}: following next_cursor visits each hit once (${seen.length} in ${pages} pages)`,
    );
  }

  // recall.
  const recall = await ok(
    api.POST("/v1/recall", { body: { question: "what indentation does the writer prefer?", filter: scope, limit: 3 } }),
    "recall",
  );
  check(recall.answer.trim() !== "", "recall: the answer is not blank");
  check(
    recall.citations.length >= 1 && recall.citations.length <= 3,
    "recall: 1 to 3 citations",
    recall.citations.length,
  );
  const cited = await ok(api.POST("/v1/get", { body: { ids: recall.citations.map((c) => c.id) } }), "get cited");
  check(cited.hits.length === recall.citations.length, "recall: every citation resolves through get");

  // list with cursors until the end.
  const listed = await listAll(api, scope, 2);
  check(listed.pages === Math.ceil(everyId.size / 2), `list: ${listed.pages} pages of 2`, listed.pages);
  check(
    listed.hits.length === everyId.size && listed.hits.every((h) => everyId.has(h.id)),
    "list: every item exactly once",
    listed.hits.map((h) => h.id),
  );
  check(new Set(listed.hits.map((h) => h.id)).size === listed.hits.length, "list: no item twice");
  check(listed.hits.every((h) => h.score === 0), "list: every score is 0");

  // explore, then narrow each bucket back into a filter and count what it selects.
  const explored = ["kind", "tag", "source", "folder", "thread", "namespace", "observed_month", "observed_hour"] as const;
  for (const facet of explored) {
    const page = await ok(api.POST("/v1/explore", { body: { facet, filter: scope, limit: 50 } }), `explore ${facet}`);
    check(page.total === everyId.size && !page.truncated, `explore ${facet}: total ${everyId.size}, exact`, page);
    const counted = page.buckets.reduce((sum, b) => sum + b.count, 0);
    if (facet !== "tag") {
      check(counted + page.missing === page.total, `explore ${facet}: buckets and missing add up to total`, page);
    }
    for (const bucket of page.buckets) {
      const narrowed: Filter = { ...scope, ...narrow(facet, bucket.value) };
      const selected = await listAll(api, narrowed, 1000);
      check(
        selected.hits.length === bucket.count,
        `explore ${facet}: bucket ${bucket.value} narrows to ${bucket.count} items`,
        selected.hits.length,
      );
    }
  }
  const kinds = await ok(api.POST("/v1/explore", { body: { facet: "kind", filter: scope, limit: 2 } }), "explore");
  check(
    JSON.stringify(kinds.buckets) ===
      JSON.stringify([
        { value: "learning", count: 5 },
        { value: "conversation", count: 1 },
      ]) && kinds.more_buckets === 1,
    "explore kind: count descending, ties by value, cut to limit with more_buckets",
    kinds,
  );

  // get by ids: in the order asked, each once, unknown ids left out.
  const unknown = "0".repeat(40);
  const got = await ok(
    api.POST("/v1/get", { body: { ids: [stored.learning, unknown, stored.document, stored.learning] } }),
    "get",
  );
  check(
    got.hits.map((h) => h.id).join() === [stored.learning, stored.document].join(),
    "get: hits in the order asked, each once, unknown left out",
    got.hits.map((h) => h.id),
  );
  const gotLearning = got.hits[0];
  check(
    gotLearning?.meta.observed_at === "2026-01-02T02:04:05Z" && gotLearning.meta.source?.kind === "agent",
    "get: observed_at in UTC with Z, source defaults to agent",
    gotLearning?.meta,
  );
  const gotDocument = got.hits[1];
  check(
    gotDocument?.text === "# Rust ownership\n\nOwnership moves values; borrowing lends them without a move.",
    "get: a document's text is its rendered form",
    gotDocument?.text,
  );
  const storedAt = gotLearning?.stored_at ?? "";
  check(
    /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(storedAt) && Date.parse(storedAt) <= Date.now(),
    "get: stored_at, when the service wrote the item, in UTC with Z",
    storedAt,
  );

  // forget by id, then by filter.
  const byId = await ok(
    api.POST("/v1/forget", { body: { ids: [stored.conversation, stored.conversation] } }),
    "forget ids",
  );
  check(byId.forgotten === 1, "forget by id: a repeated id counts once", byId);
  const gone = await ok(api.POST("/v1/get", { body: { ids: [stored.conversation] } }), "get forgotten");
  check(gone.hits.length === 0, "forget by id: the item is gone");
  const byFilter = await ok(
    api.POST("/v1/forget", { body: { filter: { ...scope, tags_any: ["batch"] } } }),
    "forget filter",
  );
  check(byFilter.forgotten === 4, "forget by filter: the four batch items", byFilter);
  const within = await ok(
    api.POST("/v1/forget_within", {
      body: { ids: [stored.document], reach: { at: "project:elsewhere", inherit: false } },
    }),
    "forget_within",
  );
  check(within.forgotten === 0, "forget_within: an id outside the reach stays", within);
  const remaining = await listAll(api, scope, 10);
  check(
    remaining.hits.map((h) => h.id).sort().join() === [stored.document, stored.learning].sort().join(),
    "forget: the document and the learning remain",
  );

  // Bad requests surface the typed envelope.
  const blank = await refused(
    api.POST("/v1/fetch", { body: { query: "  ", mode: "keyword", limit: 5 } }),
    400,
    "blank query",
  );
  check(blank.code === "invalid_request" && !blank.retryable, "blank query: code invalid_request", blank);
  const badConfidence = await refused(
    api.POST("/v1/store", { body: { type: "learning", text: "x", kind: "fact", confidence: 1.5 } }),
    400,
    "confidence 1.5",
  );
  check(badConfidence.code === "invalid_request", "confidence 1.5: code invalid_request", badConfidence);
  const emptyFilter = await refused(api.POST("/v1/forget", { body: { filter: {} } }), 400, "forget {}");
  check(emptyFilter.code === "invalid_request", "forget with an empty filter: invalid_request", emptyFilter);
  // A body the schema refuses (an unknown key): the type system has to be told to look away.
  const unknownKey = { query: "tabs", mode: "keyword", limit: 5, colour: "red" } as Schemas["FetchRequest"];
  const shape = await refused(api.POST("/v1/fetch", { body: unknownKey }), 422, "unknown key");
  check(
    shape.code === "invalid_request" && (shape.details ?? []).some((d) => d.field === "colour"),
    "unknown key: invalid_request with details naming the field",
    shape,
  );
  if (apiKey) {
    const anonymous = createClient<paths>({ baseUrl });
    const denied = await refused(anonymous.GET("/v1/engine"), 401, "no credential");
    check(denied.code === "unauthorized", "no credential: code unauthorized", denied);
  }

  // Leave nothing behind.
  const rest = await ok(api.POST("/v1/forget", { body: { filter: scope } }), "forget the rest");
  check(rest.forgotten === 2, "forget the namespace: the last two items", rest);
  const empty = await listAll(api, scope, 10);
  check(empty.hits.length === 0, "the namespace is empty");
}

type Api = ReturnType<typeof createClient<paths>>;

async function listAll(api: Api, filter: Filter, limit: number): Promise<{ hits: Hit[]; pages: number }> {
  const hits: Hit[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const body = { filter, limit, ...(cursor ? { cursor } : {}) };
    const page: Schemas["ListPage"] = await ok(api.POST("/v1/list", { body }), "list page");
    hits.push(...page.items);
    cursor = page.next_cursor;
    pages += 1;
    if (pages > 1000) throw new Error("list did not end");
  } while (cursor !== undefined);
  return { hits, pages };
}

try {
  await main();
} catch (error) {
  if (!(error instanceof Stop)) {
    failed += 1;
    console.log(`FAIL  ${error instanceof Error ? error.message : String(error)}`);
  }
}
console.log(`${passed} checks passed, ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
