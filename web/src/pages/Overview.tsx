/** Balance, held and available credits, the month's spend against the cap, 30 days of use, top tools. */
import { Effect } from "effect"
import type { Api } from "../api.js"
import { DailyChart } from "../chart.js"
import { Card, formatCredits, Loading, Problem, useLoad } from "../ui.js"

export const Overview = (props: { readonly api: Api }) => {
  const { state, reload } = useLoad(() =>
    props.api.run((c) =>
      Effect.all({
        org: c.dashboard.getOrg(),
        days: c.dashboard.usageSummary({ urlParams: { group_by: "day" } }),
        tools: c.dashboard.usageSummary({ urlParams: { group_by: "tool" } })
      }, { concurrency: 3 })))
  if (state === null) return <Loading />
  if (!state.ok) return <Problem error={state} onRetry={reload} />
  const { org, days, tools } = state.value
  const cap = org.spend_cap
  // a cap of 0 is reached already: every billed call is refused
  const used = cap === null ? 0 : cap === 0 ? 100 : Math.min(100, (org.month_spend / cap) * 100)
  return (
    <div class="grid">
      <Card title={org.name}>
        <dl class="figures">
          <div><dt>Balance</dt><dd data-testid="balance">{formatCredits(org.balance)}</dd></div>
          <div><dt>Held</dt><dd>{formatCredits(org.held)}</dd></div>
          <div><dt>Available</dt><dd>{formatCredits(org.available)}</dd></div>
        </dl>
      </Card>
      <Card title="This month">
        <p class="spend">
          <strong>{formatCredits(org.month_spend)}</strong> credits spent
          {cap === null ? ", no cap" : <> of a {formatCredits(cap)} cap</>}
        </p>
        {cap !== null && (
          <div class="meter" role="meter" aria-valuemin={0} aria-valuemax={cap} aria-valuenow={org.month_spend} aria-label="Month spend against the cap">
            <div class={used >= 90 ? "fill warn" : "fill"} style={{ width: `${used}%` }} />
          </div>
        )}
        {cap !== null && org.month_spend >= cap && (
          <p class="problem" role="status">The cap is reached: calls that cost credits are refused (spend_cap_exceeded) until next month or a higher cap.</p>
        )}
        <p class="muted"><a href="/dashboard/spend-cap">Change the spend cap</a></p>
      </Card>
      <Card title="Last 30 days" wide>
        <DailyChart days={days.data} />
        <p class="muted">{formatCredits(days.total.calls)} calls, {formatCredits(days.total.errors)} errors, {formatCredits(days.total.credits)} credits</p>
      </Card>
      <Card title="Top tools (30 days)" wide>
        {tools.data.length === 0 ? <p class="muted">No calls yet.</p> : (
          <div class="scroll">
            <table>
              <thead><tr><th>Tool</th><th class="num">Calls</th><th class="num">Errors</th><th class="num">Credits</th></tr></thead>
              <tbody>
                {tools.data.slice(0, 8).map((t) => (
                  <tr key={t.key}><td><code>{t.key}</code></td><td class="num">{t.calls}</td><td class="num">{t.errors}</td><td class="num">{t.credits}</td></tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
    </div>
  )
}
