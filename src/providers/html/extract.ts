/**
 * HTML to markdown, for the built-in reader: the page's main content (Mozilla Readability on a linkedom DOM)
 * written as markdown (Turndown). It runs in a worker thread (see `HtmlConverter`), never on the event loop,
 * because its cost on hostile input has no useful bound: Readability scores every node against its
 * ancestors, and Turndown recurses once per level of nesting.
 *
 * Bounded here too, by the shape of the document: past `MAX_DEPTH` levels of nesting or `MAX_ELEMENTS`
 * elements, the page is read as text by an iterative walk (no recursion, linear time) instead of being
 * converted; and a conversion that overflows the stack falls back to the same walk.
 *
 * A page that is not a whole document (text with no tags, a fragment, a comment, nothing) is read as the body
 * of one: Readability finds its text there, and where it finds none, the body is converted as it is.
 */
import { Readability } from "@mozilla/readability"
import { parseHTML } from "linkedom"
import TurndownService from "turndown"
import type { Extracted } from "./extracted.js"

/** Nesting deeper than this is no article: it is read as text. */
export const MAX_DEPTH = 128
/** More elements than this is read as text. */
export const MAX_ELEMENTS = 50_000

const turndown = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" })
turndown.remove(["script", "style", "noscript", "iframe"])

/**
 * What is read of a parsed page. linkedom's declarations name the DOM library's types, which this build does not
 * load, so its nodes arrive untyped: these say what is relied on, and every read below is checked against them.
 */
interface DomNode {
  readonly nodeType: number
  readonly nodeName: string
  readonly textContent: string | null
  readonly childNodes: ArrayLike<DomNode>
  readonly children: ArrayLike<DomNode>
}
interface DomElement extends DomNode {
  readonly innerHTML: string
}
interface DomDocument {
  readonly documentElement: DomNode
  querySelector(selectors: string): DomElement | null
}

const SKIPPED = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "IFRAME", "TEMPLATE", "SVG", "HEAD"])
const BLOCK = new Set([
  "P", "DIV", "SECTION", "ARTICLE", "MAIN", "HEADER", "FOOTER", "ASIDE", "NAV", "LI", "UL", "OL", "TR", "TABLE",
  "H1", "H2", "H3", "H4", "H5", "H6", "BLOCKQUOTE", "PRE", "BR", "HR", "DD", "DT", "DL", "FIGURE", "FIGCAPTION"
])

/** What `documentOf` reads of a node at the top of a parsed page. */
interface TopNode {
  readonly nodeType: number
  readonly nodeName: string
  readonly childNodes: ArrayLike<TopNode>
}

/** Elements of a document's head: kept there when a page without an `<html>` element is given one. */
const HEAD_ONLY = new Set(["TITLE", "META", "LINK", "BASE"])

/**
 * The page as a document with an `<html>` root, a head and a body. linkedom builds no such tree for what is
 * not a whole document: the root is the first element, or null for text, a comment or nothing (which a DOM
 * type would say cannot be), and its `head` and `body` getters then write inside that element. Such a page's
 * nodes are moved into a document of their own: its head's into the head, everything else into the body.
 */
const documentOf = (html: string): DomDocument => {
  const parsed = parseHTML(html).document
  const root: TopNode | null = parsed.documentElement
  if (root?.nodeName.toUpperCase() === "HTML") return parsed
  const { document } = parseHTML("<!doctype html><html><head></head><body></body></html>")
  const nodes: ArrayLike<TopNode> = parsed.childNodes
  for (const node of Array.from(nodes)) {
    if (node.nodeType === 10) continue // the doctype: the new document has its own
    const name = node.nodeName.toUpperCase()
    if (name === "HEAD") document.head.append(...Array.from(node.childNodes))
    else if (name === "BODY") document.body.append(...Array.from(node.childNodes))
    else if (HEAD_ONLY.has(name)) document.head.append(node)
    else document.body.append(node)
  }
  return document
}

/** The deepest nesting and the number of elements under `root`, counted without recursion. */
const shapeOf = (root: DomNode): { readonly depth: number; readonly elements: number } => {
  let depth = 0
  let elements = 0
  const stack: Array<readonly [DomNode, number]> = [[root, 1]]
  while (stack.length > 0) {
    const entry = stack.pop()
    if (entry === undefined) break
    const [node, level] = entry
    elements += 1
    if (level > depth) depth = level
    if (depth > MAX_DEPTH || elements > MAX_ELEMENTS) break
    for (const child of Array.from(node.children)) stack.push([child, level + 1])
  }
  return { depth, elements }
}

/** The visible text under `root`, blocks on lines of their own, by an iterative walk. */
export const textOf = (root: DomNode): string => {
  const out: Array<string> = []
  const stack: Array<DomNode | "\n"> = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    if (node === undefined) break
    if (node === "\n") {
      out.push("\n")
      continue
    }
    if (node.nodeType === 3) {
      out.push(node.textContent ?? "")
      continue
    }
    if (node.nodeType !== 1 || SKIPPED.has(node.nodeName.toUpperCase())) continue
    const block = BLOCK.has(node.nodeName.toUpperCase())
    if (block) stack.push("\n")
    const children = Array.from(node.childNodes)
    for (let i = children.length - 1; i >= 0; i--) {
      const child = children[i]
      if (child !== undefined) stack.push(child)
    }
    if (block) stack.push("\n")
  }
  return out.join("").replace(/[ \t\f\v\r]+/g, " ").replace(/ *\n */g, "\n").replace(/\n{3,}/g, "\n\n").trim()
}

const tidy = (markdown: string) => markdown.replace(/\n{3,}/g, "\n\n").trim()

/** The main content of an HTML document as markdown, and its title. */
export const extractHtml = (html: string): Extracted => {
  const document = documentOf(html)
  const fallbackTitle = document.querySelector("title")?.textContent?.trim() || null
  const root = document.documentElement
  const shape = shapeOf(root)
  if (shape.depth > MAX_DEPTH || shape.elements > MAX_ELEMENTS) {
    return { title: fallbackTitle, markdown: textOf(root), mode: "text" }
  }
  let article: ReturnType<Readability<string>["parse"]>
  try {
    article = new Readability(document, { keepClasses: false }).parse()
  } catch {
    article = null
  }
  const title = article?.title?.trim() || fallbackTitle
  const contentHtml = article?.content ?? document.querySelector("body")?.innerHTML ?? html
  try {
    return { title, markdown: tidy(turndown.turndown(contentHtml)), mode: "markdown" }
  } catch {
    // a structure Turndown cannot walk (its recursion ran out of stack): the same content, as text
    return { title, markdown: textOf(parseHTML(`<html><body>${contentHtml}</body></html>`).document.documentElement), mode: "text" }
  }
}
