/**
 * One example input per tool, for the API reference (OpenAPI `example`s) and the MCP tool descriptions.
 */
import type { ToolInputEncoded, ToolName } from "./tools.js"

export const inputExamples: { readonly [K in ToolName]: ToolInputEncoded<K> } = {
  search: { query: "effect typescript", max_results: 5 },
  read: { url: "https://example.com/article", max_chars: 20000 },
  weather: { q: "Berlin" },
  mobile_app_search: { query: "notes", country: "us", limit: 5 },
  alpha_search: { query: "latest research on retrieval", numResults: 5, type: "auto" },
  beta_read: { url: "https://example.com/doc", format: "markdown" },
  beta_search: { q: "effect typescript", num: 5, gl: "us" },
  gamma_scrape: { url: "https://example.com/page", formats: ["markdown"], onlyMainContent: true },
  gamma_search: { query: "effect typescript", limit: 5 },
  xi_movie: { id: 550, append_to_response: "videos" },
  delta_post: { text: "Hello from Tool Gateway", langs: ["en"] },
  delta_like: { uri: "at://did:plc:example/app.bsky.feed.post/3kabc", cid: "bafyreib2rxk3rh6kzwq" },
  epsilon_request: { path: "/v1/items", method: "GET", query: { page: 1 } },
  zeta_request: { path: "me", params: { fields: "id,name" } },
  eta_personal_bests: { mode: "time", mode2: "60" },
  theta_ratings: { type: "movies", page: 1, limit: 10 },
  iota_delete_service: { service_id: "srv-d04a7c5b" },
  kappa_delete_benefit: { benefit_id: "8fd1d9bc-3a66-4e3d-9b0a-2f0c5a3e2e11" },
  kappa_ingest_events: { events: [{ name: "api_call", external_customer_id: "customer-1", metadata: { tokens: 120 } }] },
  lambda_update_broadcast: { id: "559ac32e-9ef5-46fb-82a1-b76b840c0f7b" },
  lambda_batch_emails: { emails: [{ from: "team@example.com", to: ["user@example.com"], subject: "Hello", text: "Hi!" }] },
  mu_database: { database_id: "d9824bdc-8445-4327-be8b-5b47500af6ce" },
  nu_account: {}
}
