/**
 * In-memory maps that must not grow without bound (caches of keys, sessions, last writes): at most `max`
 * entries, the one written longest ago evicted first. A `Map` keeps insertion order, so the oldest entry is
 * the first key, and re-setting a key moves it to the end.
 */
export const setBounded = <K, V>(map: Map<K, V>, key: K, value: V, max: number): void => {
  map.delete(key)
  if (map.size >= max) {
    const oldest = map.keys().next()
    if (oldest.done !== true) map.delete(oldest.value)
  }
  map.set(key, value)
}
