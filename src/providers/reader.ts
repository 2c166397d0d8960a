/**
 * The built-in reader: fetch the page through the SSRF-guarded client, keep its main content and write it
 * as markdown — in a worker thread, under the call's deadline (`HtmlConverter`). Plain text, markdown and
 * JSON pages are returned as they are.
 */
import * as Effect from "effect/Effect"
import { mediaTypeOf } from "../domain/contentType.js"
import { DEFAULT_MAX_CHARS, type ToolInput, type ToolOutput } from "../domain/tools.js"
import { decodeText, ProviderClient } from "../services/ProviderClient.js"
import { ProviderRejected, ProviderResponseTooLarge } from "../domain/errors.js"
import { ArtifactSink } from "../services/Artifacts.js"
import { ProvidersConfig } from "../config.js"
import { HtmlConverter } from "../services/HtmlConverter.js"
import type { ProviderEffect, ProviderTool, Raw } from "./common.js"
import { truncate } from "./text.js"

export const PROVIDER = "builtin"

const ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,application/json;q=0.8,*/*;q=0.5"

const sniffHtml = (text: string) => /^\s*(<!doctype html|<html|<head|<body)/i.test(text.slice(0, 512))

const isText = (type: string) =>
  type === "" || type.startsWith("text/") || type === "application/json" || type.endsWith("+json") ||
  type === "application/xml" || type.endsWith("+xml")

/**
 * The page, as text in its own charset (the raw answer of `read` on the built-in reader); a file (a PDF, an
 * image) is kept as an artifact instead, and the raw answer is `{artifact}`.
 */
const fetchPage = (input: ToolInput<"read">): ProviderEffect<Raw> =>
  Effect.gen(function* () {
    const client = yield* ProviderClient
    const config = yield* ProvidersConfig
    const sink = yield* ArtifactSink
    const response = yield* client.request({
      provider: "the page's server",
      method: "GET",
      url: input.url,
      headers: { accept: ACCEPT },
      idempotent: true,
      guarded: true,
      callerUrl: true,
      maxBytes: Math.max(config.maxResponseBytes, sink.maxBytes),
      // a page that wants a login (or refuses bots) refuses the fetch, not a credential of the gateway's
      classify: (r) =>
        r.status === 401 || r.status === 403
          ? new ProviderRejected({ message: `The page refused the gateway's fetch (HTTP ${r.status}).`, upstreamStatus: r.status })
          : undefined
    })
    const header = response.headers["content-type"] ?? ""
    const type = mediaTypeOf(header)
    const base = { provider: PROVIDER, status: response.status, url: response.url, contentType: header }
    if (!isText(type)) {
      const artifact = yield* sink.store(type, response.body)
      return { ...base, body: { artifact }, artifacts: { file: artifact } }
    }
    if (response.body.length > config.maxResponseBytes) {
      return yield* new ProviderResponseTooLarge({
        message: `The page is larger than the ${config.maxResponseBytes}-byte limit.`
      })
    }
    return { ...base, body: decodeText(response.body, header) }
  })

const toText = (raw: Raw) => (typeof raw.body === "string" ? raw.body : JSON.stringify(raw.body))

export const builtinRead: ProviderTool<ToolInput<"read">, undefined, ToolOutput<"read">> = {
  fetch: fetchPage,
  normalize: (input, raw) =>
    Effect.gen(function* () {
      const file = raw.artifacts?.["file"]
      if (file !== undefined) {
        return { provider: PROVIDER, url: raw.url, title: null, content: "", chars: 0, truncated: false, artifact: file }
      }
      const type = mediaTypeOf(raw.contentType)
      const text = toText(raw)
      let title: string | null = null
      let content: string
      if (type === "text/html" || type === "application/xhtml+xml" || (type === "" && sniffHtml(text))) {
        const extracted = yield* Effect.flatMap(HtmlConverter, (converter) => converter.convert(text, "read"))
        title = extracted.title
        content = extracted.markdown
      } else if (type.startsWith("text/") || type === "") {
        content = text
      } else if (type === "application/json" || type.endsWith("+json")) {
        content = "```json\n" + text + "\n```"
      } else {
        content = text
      }
      const cut = truncate(content, input.max_chars ?? DEFAULT_MAX_CHARS)
      return {
        provider: PROVIDER,
        url: raw.url,
        title,
        content: cut.text,
        chars: cut.text.length,
        truncated: cut.truncated,
        artifact: null
      }
    })
}
