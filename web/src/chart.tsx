/** The overview's 30-day chart: credits per day as bars, calls per day as a line, in inline SVG. */
export interface Day {
  readonly key: string
  readonly calls: number
  readonly credits: number
}

const W = 720
const H = 170
const PAD = { top: 8, right: 4, bottom: 4, left: 4 }

export const DailyChart = (props: { readonly days: ReadonlyArray<Day> }) => {
  const days = props.days
  const maxCredits = Math.max(1, ...days.map((d) => d.credits))
  const maxCalls = Math.max(1, ...days.map((d) => d.calls))
  const innerW = W - PAD.left - PAD.right
  const innerH = H - PAD.top - PAD.bottom
  const step = innerW / Math.max(1, days.length)
  const y = (value: number, max: number) => PAD.top + innerH - (value / max) * innerH
  const line = days.map((d, i) => `${i === 0 ? "M" : "L"}${(PAD.left + step * i + step / 2).toFixed(1)},${y(d.calls, maxCalls).toFixed(1)}`).join(" ")
  const labels = [0, Math.floor((days.length - 1) / 2), days.length - 1].filter((i, n, all) => i >= 0 && all.indexOf(i) === n)
  const totalCredits = days.reduce((s, d) => s + d.credits, 0)
  const totalCalls = days.reduce((s, d) => s + d.calls, 0)
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`Last ${days.length} days: ${totalCredits} credits, ${totalCalls} calls`}>
        <line x1={PAD.left} x2={W - PAD.right} y1={PAD.top + innerH} y2={PAD.top + innerH} class="axis" />
        {days.map((d, i) => (
          <rect
            key={d.key}
            class="bar"
            x={PAD.left + step * i + step * 0.15}
            width={step * 0.7}
            y={y(d.credits, maxCredits)}
            height={PAD.top + innerH - y(d.credits, maxCredits)}
          >
            <title>{`${d.key}: ${d.credits} credits, ${d.calls} calls`}</title>
          </rect>
        ))}
        <path d={line} class="calls" />
      </svg>
      <div class="ticks" aria-hidden="true">
        {labels.map((i) => <span key={i}>{days[i]?.key ?? ""}</span>)}
      </div>
      <figcaption>
        <span class="swatch credits" /> credits per day (max {maxCredits}) <span class="swatch calls" /> calls per day (max {maxCalls})
      </figcaption>
    </figure>
  )
}
