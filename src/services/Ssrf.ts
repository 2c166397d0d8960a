/**
 * The SSRF guard for URLs that come from callers (`read`, and later the generic REST providers):
 * loopback, private, link-local, carrier-grade NAT, metadata, multicast and reserved addresses are
 * refused, whether written as an IP (in any form the URL parser accepts), reached through a hostname
 * that resolves to one, or reached by a redirect. The check runs on the address actually connected to
 * (inside DNS lookup), so a hostname cannot resolve to a public address for the check and a private
 * one for the connection. `SSRF_ALLOW` (hosts or CIDRs) is the operator's only way around it.
 */
import * as Dns from "node:dns"
import * as Net from "node:net"
import * as Os from "node:os"

const blocked = new Net.BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this network", includes 0.0.0.0
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata (169.254.169.254)
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4] // reserved, broadcast
] as const) blocked.addSubnet(net, prefix, "ipv4")
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["100::", 64], // discard
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local, includes fd00:ec2::254 (metadata)
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
  // addresses that carry an IPv4 address a router or relay would reach instead: IPv4-translated (RFC 2765),
  // local-use NAT64 (RFC 8215), Teredo (RFC 4380) and 6to4 (RFC 3056, deprecated by RFC 7526); no public API
  // is served on them, so they are refused whatever IPv4 address they carry
  ["::ffff:0:0:0", 96],
  ["64:ff9b:1::", 48],
  ["2001::", 32],
  ["2002::", 16]
] as const) blocked.addSubnet(net, prefix, "ipv6")

/** An IPv6 address's eight 16-bit groups (a dotted IPv4 tail read as two), or undefined if it is not one. */
const groupsOf = (address: string): ReadonlyArray<number> | undefined => {
  if (Net.isIPv6(address) === false) return undefined
  const dotted = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address)
  const hex = dotted === null
    ? address
    : `${dotted[1]}${((Number(dotted[2]) << 8) | Number(dotted[3])).toString(16)}:${((Number(dotted[4]) << 8) | Number(dotted[5])).toString(16)}`
  const [head = "", tail] = hex.split("::")
  const part = (text: string | undefined) => (text === undefined || text === "" ? [] : text.split(":").map((g) => parseInt(g, 16)))
  const front = part(head)
  const back = part(tail)
  const zeros = tail === undefined ? [] : Array.from({ length: 8 - front.length - back.length }, () => 0)
  const groups = [...front, ...zeros, ...back]
  return groups.length === 8 ? groups : undefined
}

/** The prefixes (their first six groups) whose addresses carry an IPv4 address in their last 32 bits. */
const CARRIERS: ReadonlyArray<ReadonlyArray<number>> = [
  [0, 0, 0, 0, 0, 0xffff], // IPv4-mapped
  [0, 0, 0, 0, 0, 0], // IPv4-compatible (deprecated)
  [0x64, 0xff9b, 0, 0, 0, 0] // NAT64 (RFC 6052)
]

/** The IPv4 address embedded in an IPv4-mapped, IPv4-compatible or NAT64 IPv6 address, in any spelling. */
const embeddedIpv4 = (address: string): string | undefined => {
  const groups = groupsOf(address)
  if (groups === undefined || !CARRIERS.some((prefix) => prefix.every((g, i) => groups[i] === g))) return undefined
  const hi = groups[6] ?? 0
  const lo = groups[7] ?? 0
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

export interface SsrfPolicy {
  readonly allowHosts: ReadonlySet<string>
  readonly allowList: Net.BlockList
}

const HOSTNAME = /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/i

type EntryType = "ipv4" | "ipv6"

/**
 * One allow-list entry, read: an IP address (IPv6 in brackets or not), a CIDR (an address and a prefix length its
 * family has), or a host name; undefined for anything else (it would be a host name that never matches).
 */
const policyEntry = (raw: string):
  | { readonly kind: "address"; readonly net: string; readonly type: EntryType }
  | { readonly kind: "subnet"; readonly net: string; readonly prefix: number; readonly type: EntryType }
  | { readonly kind: "host"; readonly host: string }
  | undefined => {
  const entry = raw.trim().toLowerCase().replace(/^\[|\]$/g, "")
  const slash = entry.indexOf("/")
  const net = slash === -1 ? entry : entry.slice(0, slash)
  const family = Net.isIP(net)
  const type = family === 4 ? "ipv4" : "ipv6"
  if (slash === -1) {
    if (family !== 0) return { kind: "address", net, type }
    return HOSTNAME.test(entry) ? { kind: "host", host: entry } : undefined
  }
  const prefix = entry.slice(slash + 1)
  return family !== 0 && /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128)
    ? { kind: "subnet", net, prefix: Number(prefix), type }
    : undefined
}

/** Whether `entry` is one `makePolicy` takes (`SSRF_ALLOW` is checked with it at start). */
export const isPolicyEntry = (raw: string): boolean => policyEntry(raw) !== undefined

export const makePolicy = (entries: ReadonlyArray<string>): SsrfPolicy => {
  const allowHosts = new Set<string>()
  const allowList = new Net.BlockList()
  for (const raw of entries) {
    const entry = policyEntry(raw)
    if (entry?.kind === "address") allowList.addAddress(entry.net, entry.type)
    else if (entry?.kind === "subnet") allowList.addSubnet(entry.net, entry.prefix, entry.type)
    else if (entry?.kind === "host") allowHosts.add(entry.host)
  }
  return { allowHosts, allowList }
}

const REFUSED_KIND = "a private, loopback, link-local or reserved address"

/**
 * This machine's own addresses, as its interfaces have them now: a public one (a server's own IP) reaches the
 * services listening on every address (a database, this gateway) as loopback does.
 */
const ownAddresses = (): Net.BlockList => {
  const list = new Net.BlockList()
  for (const addresses of Object.values(Os.networkInterfaces())) {
    for (const a of addresses ?? []) list.addAddress(a.address.replace(/%.*$/, ""), a.family === "IPv4" ? "ipv4" : "ipv6")
  }
  return list
}

/** Why an address may not be connected to, or undefined when it may. */
export const refusedAddress = (policy: SsrfPolicy, address: string): string | undefined => {
  const family = Net.isIP(address)
  if (family === 0) return `${address} is not an IP address`
  const type = family === 4 ? "ipv4" : "ipv6"
  if (policy.allowList.check(address, type)) return undefined
  if (ownAddresses().check(address, type)) return `${address} is an address of this machine`
  if (blocked.check(address, type)) return `${address} is ${REFUSED_KIND}`
  // an IPv6 address that carries an IPv4 one is refused as that one is (and let through where it is allow-listed)
  const v4 = family === 6 ? embeddedIpv4(address) : undefined
  return v4 === undefined ? undefined : refusedAddress(policy, v4)
}

/** The hostname of a URL without IPv6 brackets, lower-cased. */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[|\]$/g, "").toLowerCase()

/**
 * Check a caller-supplied URL before connecting: scheme, allow-listed host, and IP literals (which are
 * connected to without a DNS lookup). Hostnames are checked at connection time by `guardedLookup`.
 */
export const refusedUrl = (policy: SsrfPolicy, url: URL): string | undefined => {
  if (url.protocol !== "http:" && url.protocol !== "https:") return `scheme ${url.protocol} is not allowed`
  if (url.username !== "" || url.password !== "") return "URLs with credentials are not allowed"
  const host = hostOf(url)
  if (policy.allowHosts.has(host)) return undefined
  if (Net.isIP(host) !== 0) return refusedAddress(policy, host)
  if (host === "localhost" || host.endsWith(".localhost")) return `${host} is a loopback name`
  return undefined
}

export class SsrfRefused extends Error {
  readonly code = "ESSRF"
}

/**
 * The guard could not resolve a host name, so it could not check where it leads: `dnsCode` (also its `code`, as
 * the lookup's own error has it) is `ENOTFOUND` when the name does not exist in the DNS this gateway uses, anything
 * else (`EAI_AGAIN`) when the lookup failed for now. A caller's URL is then not handed to another provider (a
 * self-hosted reader may resolve it inside its network): see ProviderClient's `callerUrl`.
 */
export class HostUnresolved extends Error {
  readonly code: string
  constructor(readonly host: string, readonly dnsCode: string) {
    super(`${host} could not be resolved (${dnsCode})`)
    this.code = dnsCode
  }
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | Array<Dns.LookupAddress>,
  family?: number
) => void

/** A `net.connect` lookup that refuses hostnames resolving to a refused address. */
export const guardedLookup = (policy: SsrfPolicy) =>
(hostname: string, options: Dns.LookupOptions, callback: LookupCallback): void => {
  const host = hostname.toLowerCase()
  Dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(new HostUnresolved(hostname, err.code ?? "lookup failed"), [])
    if (!policy.allowHosts.has(host)) {
      for (const { address } of addresses) {
        const reason = refusedAddress(policy, address)
        // the address is not said: the gateway's resolver is no oracle of a network's private names
        if (reason !== undefined) return callback(new SsrfRefused(`${hostname} resolves to ${REFUSED_KIND}`), [])
      }
    }
    if (options.all === true) return callback(null, addresses)
    const first = addresses[0]
    if (first === undefined) return callback(new SsrfRefused(`${hostname} did not resolve`), [])
    return callback(null, first.address, first.family)
  })
}

/**
 * Why a URL a user saved (a connection's base URL) may not be used, checked when it is saved: what
 * `refusedUrl` refuses, and a hostname that resolves to a refused address now. A name that does not resolve
 * is let through (the lookup may fail for a while; the guard checks again on every call).
 */
export const refusedDestination = async (policy: SsrfPolicy, url: URL): Promise<string | undefined> => {
  const reason = refusedUrl(policy, url)
  const host = hostOf(url)
  if (reason !== undefined || Net.isIP(host) !== 0 || policy.allowHosts.has(host)) return reason
  const addresses = await Dns.promises.lookup(host, { all: true }).catch(() => [])
  for (const { address } of addresses) {
    const refused = refusedAddress(policy, address)
    if (refused !== undefined) return `${host} resolves to ${REFUSED_KIND}`
  }
  return undefined
}
