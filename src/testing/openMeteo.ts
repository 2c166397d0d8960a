/**
 * Open-Meteo's geocoding (`GET /v1/search`) and forecast (`GET /v1/forecast`) APIs, on one server.
 * Like the real API: no key, parameters in the query, `{"error":true,"reason":…}` with 400 on bad input.
 * Written from Open-Meteo's docs: https://open-meteo.com/en/docs (forecast, its "Errors" section) and
 * https://open-meteo.com/en/docs/geocoding-api (search).
 *
 * Open-Meteo answers `null` for a value its model does not have at a place and time, `current`'s included
 * (open-meteo/open-meteo issues #1307 and #314): the forecast for `NO_DATA`'s coordinates is such an answer.
 */
import { json, type RecordedRequest, type Reply, upstream } from "./harness.js"

/** The places the fake geocoder knows (by lower-case name); any other name has no results. */
export const PLACES: Record<string, { name: string; latitude: number; longitude: number; country: string; timezone: string }> = {
  berlin: { name: "Berlin", latitude: 52.52437, longitude: 13.41053, country: "Germany", timezone: "Europe/Berlin" },
  paris: { name: "Paris", latitude: 48.85341, longitude: 2.3488, country: "France", timezone: "Europe/Paris" }
}

const bad = (reason: string): Reply => json(400, { error: true, reason })

/** The forecast answer for any coordinates: 4.2 °C now, and seven days. */
export const forecastBody = (latitude: number, longitude: number) => ({
  latitude,
  longitude,
  generationtime_ms: 0.05,
  utc_offset_seconds: 3600,
  timezone: "Europe/Berlin",
  timezone_abbreviation: "GMT+1",
  elevation: 38,
  current_units: { time: "iso8601", interval: "seconds", temperature_2m: "°C" },
  current: {
    time: "2026-11-22T10:00",
    interval: 900,
    temperature_2m: 4.2,
    relative_humidity_2m: 81,
    apparent_temperature: 1.1,
    precipitation: 0,
    weather_code: 3,
    wind_speed_10m: 11.5,
    wind_direction_10m: 240
  },
  daily_units: { time: "iso8601", temperature_2m_max: "°C" },
  daily: {
    time: ["2026-11-22", "2026-11-23", "2026-11-24", "2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28"],
    weather_code: [3, 61, 63, 2, 0, 71, 45],
    temperature_2m_max: [6.1, 7.0, 5.2, 4.8, 3.9, 1.0, 2.2],
    temperature_2m_min: [1.2, 2.9, 1.1, -0.4, -1.5, -3.0, -2.1],
    precipitation_sum: [0, 3.2, 8.1, 0, 0, 1.4, 0]
  }
})

/** Coordinates where the fake forecast has no current data: every `current` value but its time is `null`. */
export const NO_DATA = { latitude: -48.87667, longitude: -123.39333 }

/** The forecast answer of a place without current data (see `NO_DATA`). */
export const forecastWithoutCurrentData = (latitude: number, longitude: number) => {
  const body = forecastBody(latitude, longitude)
  return {
    ...body,
    current: {
      time: body.current.time,
      interval: body.current.interval,
      temperature_2m: null,
      relative_humidity_2m: null,
      apparent_temperature: null,
      precipitation: null,
      weather_code: null,
      wind_speed_10m: null,
      wind_direction_10m: null
    }
  }
}

export const handleOpenMeteo = (req: RecordedRequest): Reply => {
  if (req.method !== "GET") return json(405, { error: true, reason: "Method not allowed" })
  if (req.path === "/v1/search") {
    const name = req.query.get("name")
    if (name === null || name === "") return bad("Parameter 'name' is required")
    const place = PLACES[name.toLowerCase()]
    return json(200, place === undefined
      ? { generationtime_ms: 0.3 }
      : { results: [{ id: 2950159, ...place, country_code: "DE", admin1: "State" }], generationtime_ms: 0.4 })
  }
  if (req.path === "/v1/forecast") {
    const lat = Number(req.query.get("latitude"))
    const lon = Number(req.query.get("longitude"))
    if (!Number.isFinite(lat) || !Number.isFinite(lon)) return bad("Parameter 'latitude' and 'longitude' are required")
    if (req.query.get("current") === null || req.query.get("daily") === null) return bad("current and daily expected")
    const missing = lat === NO_DATA.latitude && lon === NO_DATA.longitude
    return json(200, missing ? forecastWithoutCurrentData(lat, lon) : forecastBody(lat, lon))
  }
  return json(404, { error: true, reason: "Not Found" })
}

/** The fake Open-Meteo (geocoding and forecast) for the life of the scope. */
export const openMeteo = upstream(handleOpenMeteo)
