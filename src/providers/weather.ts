/**
 * `weather` on Open-Meteo: the geocoding API turns `q` into coordinates, the forecast API answers
 * current conditions and seven days. Neither needs a key. The raw answer is both upstream answers.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ToolInput, ToolOutput } from "../domain/tools.js"
import { ProvidersConfig } from "../config.js"
import { NormalizationFailed } from "../domain/errors.js"
import { clip, MAX_QUOTED_ISSUE } from "../domain/parse.js"
import { decodeUpstream, invalid, type ProviderTool, type Raw, requestJson } from "./common.js"

export const PROVIDER = "open-meteo"

// -- upstream schemas (the fields the gateway reads) -------------------------------------------------

const GeocodingResult = Schema.Struct({
  name: Schema.String,
  latitude: Schema.Number,
  longitude: Schema.Number,
  country: Schema.optional(Schema.String),
  timezone: Schema.optional(Schema.String)
})
// Open-Meteo leaves `results` out when nothing matches; `generationtime_ms` is always there.
export const GeocodingAnswer = Schema.Struct({
  generationtime_ms: Schema.Number,
  results: Schema.optional(Schema.Array(GeocodingResult))
})

const nullableNumber = Schema.NullOr(Schema.Number)
export const ForecastAnswer = Schema.Struct({
  latitude: Schema.Number,
  longitude: Schema.Number,
  timezone: Schema.String,
  // Open-Meteo answers null for a value it has no data for, `current`'s included (open-meteo/open-meteo #1307, #314)
  current: Schema.Struct({
    time: Schema.String,
    temperature_2m: nullableNumber,
    relative_humidity_2m: Schema.optional(nullableNumber),
    apparent_temperature: Schema.optional(nullableNumber),
    precipitation: Schema.optional(nullableNumber),
    weather_code: nullableNumber,
    wind_speed_10m: Schema.optional(nullableNumber),
    wind_direction_10m: Schema.optional(nullableNumber)
  }),
  daily: Schema.Struct({
    time: Schema.Array(Schema.String),
    weather_code: Schema.optional(Schema.Array(nullableNumber)),
    temperature_2m_max: Schema.optional(Schema.Array(nullableNumber)),
    temperature_2m_min: Schema.optional(Schema.Array(nullableNumber)),
    precipitation_sum: Schema.optional(Schema.Array(nullableNumber))
  })
})

/** The raw answer: the geocoding's (none for coordinates) and the forecast's (none when the geocoding could not be read). */
const RawWeather = Schema.Struct({ geocoding: Schema.NullOr(GeocodingAnswer), forecast: Schema.NullOr(ForecastAnswer) })

// WMO weather interpretation codes, as Open-Meteo documents them.
const WMO: Readonly<Record<number, string>> = {
  0: "Clear sky",
  1: "Mainly clear",
  2: "Partly cloudy",
  3: "Overcast",
  45: "Fog",
  48: "Depositing rime fog",
  51: "Light drizzle",
  53: "Moderate drizzle",
  55: "Dense drizzle",
  56: "Light freezing drizzle",
  57: "Dense freezing drizzle",
  61: "Slight rain",
  63: "Moderate rain",
  65: "Heavy rain",
  66: "Light freezing rain",
  67: "Heavy freezing rain",
  71: "Slight snowfall",
  73: "Moderate snowfall",
  75: "Heavy snowfall",
  77: "Snow grains",
  80: "Slight rain showers",
  81: "Moderate rain showers",
  82: "Violent rain showers",
  85: "Slight snow showers",
  86: "Heavy snow showers",
  95: "Thunderstorm",
  96: "Thunderstorm with slight hail",
  99: "Thunderstorm with heavy hail"
}

export const describeWeatherCode = (code: number | null): string =>
  code === null ? "Unknown" : WMO[code] ?? `Weather code ${code}`

const CURRENT = [
  "temperature_2m",
  "relative_humidity_2m",
  "apparent_temperature",
  "precipitation",
  "weather_code",
  "wind_speed_10m",
  "wind_direction_10m"
].join(",")
const DAILY = ["weather_code", "temperature_2m_max", "temperature_2m_min", "precipitation_sum"].join(",")

const fetch = (input: ToolInput<"weather">) =>
  Effect.gen(function* () {
    const config = yield* ProvidersConfig
    let geocoding: Raw | null = null
    let latitude = input.lat
    let longitude = input.lon
    if (latitude === undefined || longitude === undefined) {
      const q = input.q ?? ""
      const url = new URL(`${config.endpoints.geocoding.baseUrl}/v1/search`)
      url.search = new URLSearchParams({ name: q, count: "1", language: "en", format: "json" }).toString()
      geocoding = yield* requestJson({ provider: PROVIDER, method: "GET", url: url.toString(), idempotent: true })
      const answer = yield* Effect.either(decodeUpstream(PROVIDER, GeocodingAnswer, "weather")(geocoding.body))
      // Without coordinates there is no forecast to ask for: the raw answer is the geocoding's as it came (what
      // `POST /v1/run` serves, as the contract promises for an answer the tool cannot read), and `normalize` fails
      // on it, naming what in it could not be read.
      if (Either.isLeft(answer)) return { ...geocoding, body: { geocoding: geocoding.body, forecast: null } }
      const first = answer.right.results?.[0]
      // the name quoted as any value sent is, at most MAX_QUOTED_ISSUE characters of it
      if (first === undefined) {
        return yield* invalid(`No place named "${clip(q, MAX_QUOTED_ISSUE)}" was found. Check q, or send lat and lon instead.`)
      }
      latitude = first.latitude
      longitude = first.longitude
    }
    const url = new URL(`${config.endpoints.weather.baseUrl}/v1/forecast`)
    url.search = new URLSearchParams({
      latitude: String(latitude),
      longitude: String(longitude),
      current: CURRENT,
      daily: DAILY,
      timezone: "auto",
      forecast_days: "7"
    }).toString()
    const forecast = yield* requestJson({ provider: PROVIDER, method: "GET", url: url.toString(), idempotent: true })
    return { ...forecast, body: { geocoding: geocoding?.body ?? null, forecast: forecast.body } }
  })

const normalize = (input: ToolInput<"weather">, raw: Raw) =>
  Effect.gen(function* () {
    const answer = yield* decodeUpstream(PROVIDER, RawWeather, "weather")(raw.body)
    const forecast = answer.forecast
    if (forecast === null) {
      return yield* new NormalizationFailed({
        message: `The ${PROVIDER} answer has no forecast. POST /v1/run with {"tool":"weather","input":...} returns the provider's raw answer.`
      })
    }
    const place = answer.geocoding?.results?.[0]
    const c = forecast.current
    const d = forecast.daily
    return {
      provider: PROVIDER,
      location: {
        name: place?.name ?? input.q ?? null,
        country: place?.country ?? null,
        latitude: forecast.latitude,
        longitude: forecast.longitude,
        timezone: forecast.timezone
      },
      current: {
        time: c.time,
        temperature_c: c.temperature_2m,
        apparent_temperature_c: c.apparent_temperature ?? null,
        relative_humidity_pct: c.relative_humidity_2m ?? null,
        precipitation_mm: c.precipitation ?? null,
        wind_speed_kmh: c.wind_speed_10m ?? null,
        wind_direction_deg: c.wind_direction_10m ?? null,
        weather_code: c.weather_code === null ? null : Math.round(c.weather_code),
        description: describeWeatherCode(c.weather_code)
      },
      daily: d.time.map((date, i) => {
        const code = d.weather_code?.[i] ?? null
        return {
          date,
          temperature_max_c: d.temperature_2m_max?.[i] ?? null,
          temperature_min_c: d.temperature_2m_min?.[i] ?? null,
          precipitation_mm: d.precipitation_sum?.[i] ?? null,
          weather_code: code === null ? null : Math.round(code),
          description: describeWeatherCode(code)
        }
      })
    } satisfies ToolOutput<"weather">
  })

export const weather: ProviderTool<ToolInput<"weather">, undefined, ToolOutput<"weather">> = { fetch, normalize }
