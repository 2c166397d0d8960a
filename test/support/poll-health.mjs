// Polls `<base>/healthz` every 50 ms until its stdin closes, then prints each answer's time in milliseconds
// (JSON). A process of its own, so that what it measures is the gateway, not the test process's own load.
const base = process.argv[2]
const times = []
let polling = true
process.stdin.on("end", () => (polling = false))
process.stdin.resume()
// the first request opens the connection (and loads fetch): not a measure of the gateway
await (await fetch(`${base}/healthz`)).text()
process.stdout.write("ready\n")
while (polling) {
  const started = performance.now()
  const answer = await fetch(`${base}/healthz`)
  await answer.text()
  times.push(performance.now() - started)
  await new Promise((resolve) => setTimeout(resolve, 50))
}
process.stdout.write(JSON.stringify(times) + "\n")
