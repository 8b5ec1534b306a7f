// Small DOM helpers. Text always goes in through textContent (or Text nodes): nothing a
// model, a tool or a server wrote is ever parsed as HTML.

type Child = Node | string | null | undefined | false;

/** Props are an element's class, attributes and text. */
export interface Props {
  class?: string;
  text?: string;
  title?: string;
  /** Attributes, set with setAttribute (data-*, aria-*, type, …). */
  attrs?: Record<string, string>;
}

/** h makes an element. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (props.class !== undefined) e.className = props.class;
  if (props.title !== undefined) e.title = props.title;
  if (props.attrs !== undefined) {
    for (const [k, v] of Object.entries(props.attrs)) e.setAttribute(k, v);
  }
  if (props.text !== undefined) e.textContent = props.text;
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c);
  }
  return e;
}

/** byId returns the element of id, which the page must have. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (e === null) throw new Error("console: no element #" + id);
  return e as T;
}

/** button makes a button that calls onClick. */
export function button(text: string, onClick: (ev: MouseEvent) => void, props: Props = {}): HTMLButtonElement {
  const b = h("button", { ...props, text, attrs: { type: "button", ...props.attrs } });
  b.addEventListener("click", onClick);
  return b;
}

/** prettyJSON pretty-prints JSON text; text that is not JSON comes back unchanged. */
export function prettyJSON(s: string): string {
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch {
    return s;
  }
}

/** count writes "1 tool call", "2 tool calls". */
export function count(n: number | bigint, one: string, many = one + "s"): string {
  return `${n.toLocaleString("en")} ${Number(n) === 1 ? one : many}`;
}
