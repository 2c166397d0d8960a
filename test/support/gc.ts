/**
 * A full garbage collection, on demand: V8's `gc`, exposed to this process when first asked for (what memory is
 * still held, not what is garbage not yet collected).
 */
import * as V8 from "node:v8"
import * as Vm from "node:vm"

export const collectGarbage = () => {
  V8.setFlagsFromString("--expose-gc")
  const gc: unknown = Vm.runInNewContext("gc")
  if (typeof gc !== "function") throw new Error("V8 did not expose gc")
  Reflect.apply(gc, undefined, [])
}
