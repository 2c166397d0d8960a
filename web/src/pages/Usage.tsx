/** The usage log: filter by key, tool, status and dates; page through it; download what matches as CSV. */
import { Effect } from "effect"
import { useState } from "preact/hooks"
import { USAGE_CSV_MAX } from "../../../src/domain/dashboard.js"
import type { Api } from "../api.js"
import { Card, Field, formatTime, Loading, Problem, useLoad } from "../ui.js"

interface Filters {
  readonly key_id: string
  readonly tool: string
  readonly status: "" | "ok" | "error"
  readonly from: string
  readonly to: string
}

/** The filters as query parameters: empty ones left out; `to` is a whole day, so the next day's start. */
const paramsOf = (f: Filters) => ({
  ...(f.key_id === "" ? {} : { key_id: f.key_id }),
  ...(f.tool === "" ? {} : { tool: f.tool }),
  ...(f.status === "" ? {} : { status: f.status }),
  ...(f.from === "" ? {} : { from: f.from }),
  ...(f.to === "" || f.to >= LAST_DAY ? {} : { to: new Date(Date.parse(`${f.to}T00:00:00Z`) + 86_400_000).toISOString() })
})

/** The last day a date can name (ISO 8601's four-digit years): to its end is no bound at all. */
const LAST_DAY = "9999-12-31"

const PAGE = 25

const DATE = /^\d{4}-\d{2}-\d{2}$/

/** The filters the page's address holds (`?tool=weather&status=ok`), so that a reload or a shared link keeps them. */
const filtersOfAddress = (): Filters => {
  const query = new URLSearchParams(location.search)
  const text = (name: string) => query.get(name)?.slice(0, 200) ?? ""
  const status = text("status")
  const date = (name: string) => (DATE.test(text(name)) ? text(name) : "")
  return { key_id: text("key_id"), tool: text("tool"), status: status === "ok" || status === "error" ? status : "", from: date("from"), to: date("to") }
}

/** The address for these filters (the empty ones left out), in place of the current one: no new history entry. */
const showInAddress = (f: Filters) => {
  const query = new URLSearchParams(Object.entries(f).filter(([, value]) => value !== ""))
  const search = query.toString() === "" ? "" : `?${query.toString()}`
  history.replaceState(history.state, "", `${location.pathname}${search}`)
}

const sameFilters = (a: Filters, b: Filters) =>
  a.key_id === b.key_id && a.tool === b.tool && a.status === b.status && a.from === b.from && a.to === b.to

/**
 * A filter's value that is none of the list's (a link's `?tool=` of a tool since removed, a typing mistake): shown as
 * it is, so the list does not read "All tools" while the rows are filtered by it; said so once the list is read.
 */
const unlisted = (value: string, listed: ReadonlyArray<string> | null, note: string) =>
  value === "" || listed?.includes(value) === true ? null : (
    <option value={value}>{listed === null ? value : `${value} (${note})`}</option>
  )

export const Usage = (props: { readonly api: Api }) => {
  const [draft, setDraft] = useState<Filters>(filtersOfAddress)
  const [filters, setFilters] = useState<Filters>(filtersOfAddress)
  // the cursors of the pages before this one (for "Newer")
  const [cursors, setCursors] = useState<ReadonlyArray<string | undefined>>([undefined])
  const cursor = cursors[cursors.length - 1]
  const [error, setError] = useState<{ readonly code: string; readonly message: string } | null>(null)
  const [cutOff, setCutOff] = useState(false)
  const lists = useLoad(() =>
    props.api.run((c) => Effect.all({ keys: c.dashboard.listKeys(), catalog: c.catalog.list() }, { concurrency: 2 })))
  const page = useLoad(
    () => props.api.run((c) => c.dashboard.usage({ urlParams: { ...paramsOf(filters), limit: PAGE, ...(cursor === undefined ? {} : { cursor }) } })),
    [filters, cursor]
  )
  const set = (patch: Partial<Filters>) => setDraft({ ...draft, ...patch })
  // the filters on screen are the ones applied: the rows below, the address and a download all follow them
  const apply = (f: Filters) => {
    if (sameFilters(f, filters)) return
    setFilters(f)
    showInAddress(f)
    setCursors([undefined])
  }

  // the file holds what the filters on screen match (applied first, so the rows below are the same calls)
  const download = () => {
    apply(draft)
    void props.api.run((c) => c.dashboard.usage({ urlParams: { ...paramsOf(draft), format: "csv" } })).then((outcome) => {
      if (!outcome.ok) return setError(outcome)
      if (typeof outcome.value !== "string") return setError({ code: "internal_error", message: "The export was not CSV." })
      setError(null)
      // an export holds at most USAGE_CSV_MAX rows (a header line, then one line a record)
      setCutOff(outcome.value.split("\r\n").length - 2 >= USAGE_CSV_MAX)
      const link = document.createElement("a")
      link.href = URL.createObjectURL(new Blob([outcome.value], { type: "text/csv" }))
      link.download = "usage.csv"
      document.body.append(link)
      link.click()
      link.remove()
      setTimeout(() => URL.revokeObjectURL(link.href), 10_000)
    })
  }

  const keys = lists.state?.ok === true ? lists.state.value.keys.data : []
  const tools = lists.state?.ok === true ? lists.state.value.catalog.data.map((t) => t.name) : []
  const result = page.state
  const records = result?.ok === true && typeof result.value !== "string" ? result.value : undefined

  return (
    <Card title="Usage" wide>
      <form
        class="form filters"
        onSubmit={(e) => {
          e.preventDefault()
          apply(draft)
        }}
      >
        <Field label="Key">
          <select name="key_id" value={draft.key_id} onChange={(e) => set({ key_id: e.currentTarget.value })}>
            <option value="">All keys</option>
            {keys.map((k) => <option key={k.id} value={k.id}>{k.name} ({k.prefix}…)</option>)}
            {unlisted(draft.key_id, lists.state?.ok === true ? keys.map((k) => k.id) : null, "no such key")}
          </select>
        </Field>
        <Field label="Tool">
          <select name="tool" value={draft.tool} onChange={(e) => set({ tool: e.currentTarget.value })}>
            <option value="">All tools</option>
            {tools.map((t) => <option key={t} value={t}>{t}</option>)}
            {unlisted(draft.tool, lists.state?.ok === true ? tools : null, "not in the catalog")}
          </select>
        </Field>
        <Field label="Status">
          <select
            name="status"
            value={draft.status}
            onChange={(e) => {
              const v = e.currentTarget.value
              set({ status: v === "ok" || v === "error" ? v : "" })
            }}
          >
            <option value="">Any</option>
            <option value="ok">Succeeded</option>
            <option value="error">Failed</option>
          </select>
        </Field>
        <Field label="From">
          <input name="from" type="date" value={draft.from} onInput={(e) => set({ from: e.currentTarget.value })} />
        </Field>
        <Field label="To">
          <input name="to" type="date" value={draft.to} onInput={(e) => set({ to: e.currentTarget.value })} />
        </Field>
        <div class="actions">
          <button type="submit" class="primary">Apply</button>
          <button type="button" onClick={download}>Download CSV</button>
        </div>
      </form>
      <Problem error={error} />
      {cutOff && (
        <p class="muted" role="status">
          The file holds the newest {USAGE_CSV_MAX.toLocaleString("en-US")} matches; more match. Narrow the dates for the
          rest, or ask the API (<code>GET /v1/usage?format=csv</code> answers where the rest starts in <code>X-Next-Cursor</code>).
        </p>
      )}
      {result === null ? <Loading /> : !result.ok ? <Problem error={result} onRetry={page.reload} /> : records === undefined ? null : (
        <>
          {records.data.length === 0 ? <p class="muted">No calls match.</p> : (
            <div class="scroll">
              {/* the rows of the filters or page before, until the new ones come: marked, and not paged from */}
              <table class={page.loading ? "usage stale" : "usage"} aria-busy={page.loading}>
                <thead>
                  <tr><th>Time</th><th>Tool</th><th>Outcome</th><th class="num">Credits</th><th class="num">ms</th><th>Key</th><th>Request</th></tr>
                </thead>
                <tbody>
                  {records.data.map((r) => (
                    <tr key={r.id}>
                      <td class="nowrap">{formatTime(r.time)}</td>
                      <td><code>{r.tool}</code></td>
                      <td><span class={r.status < 400 ? "badge ok" : "badge"}>{r.status} {r.code}</span></td>
                      <td class="num">{r.credits}</td>
                      <td class="num">{r.latency_ms}</td>
                      <td><code>{keys.find((k) => k.id === r.key_id)?.name ?? r.key_id}</code></td>
                      <td><code class="small">{r.request_id}</code></td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <div class="actions pager">
            <button type="button" disabled={page.loading || cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>Newer</button>
            <button type="button" disabled={page.loading || records.next_cursor === null} onClick={() => {
              const next = records.next_cursor
              if (next !== null) setCursors([...cursors, next])
            }}>Older</button>
          </div>
        </>
      )}
    </Card>
  )
}
