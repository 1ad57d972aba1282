// A strict XML 1.0 well-formedness check (enough for ndbench's SVG): one root element, balanced and properly
// nested tags, quoted unique attributes, only the predefined or numeric entities, no stray '<' or '&'.
// Returns the root element's name and every element name in document order. Throws on the first error.

export interface XmlInfo {
  root: string;
  elements: string[];
  attributes: Array<Record<string, string>>;
  text: string;
}

const NAME = /^[A-Za-z_:][\w.:-]*/;

function checkText(s: string, at: number): string {
  for (let i = s.indexOf('&'); i >= 0; i = s.indexOf('&', i + 1)) {
    const m = /^&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/.exec(s.slice(i));
    if (!m) throw new Error(`bad entity at ${at + i}: ${JSON.stringify(s.slice(i, i + 12))}`);
  }
  if (s.includes('<')) throw new Error(`stray '<' at ${at}`);
  return s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');
}

export function parseXml(doc: string): XmlInfo {
  let i = 0;
  const stack: string[] = [];
  const elements: string[] = [];
  const attributes: Array<Record<string, string>> = [];
  let root = '';
  let text = '';
  let closedRoot = false;
  if (doc.startsWith('<?xml')) {
    const end = doc.indexOf('?>');
    if (end < 0) throw new Error('unterminated XML declaration');
    i = end + 2;
  }
  while (i < doc.length) {
    const lt = doc.indexOf('<', i);
    const chunk = doc.slice(i, lt < 0 ? doc.length : lt);
    if (stack.length === 0 && chunk.trim() !== '') throw new Error(`text outside the root element at ${i}`);
    text += checkText(chunk, i);
    if (lt < 0) break;
    if (doc.startsWith('<!--', lt)) {
      const end = doc.indexOf('-->', lt);
      if (end < 0) throw new Error('unterminated comment');
      i = end + 3;
      continue;
    }
    const gt = doc.indexOf('>', lt);
    if (gt < 0) throw new Error(`unterminated tag at ${lt}`);
    let tag = doc.slice(lt + 1, gt);
    if (tag.startsWith('/')) {
      const name = tag.slice(1).trim();
      const open = stack.pop();
      if (open !== name) throw new Error(`</${name}> closes <${open ?? 'nothing'}> at ${lt}`);
      if (stack.length === 0) closedRoot = true;
      i = gt + 1;
      continue;
    }
    const selfClosing = tag.endsWith('/');
    if (selfClosing) tag = tag.slice(0, -1);
    const nm = NAME.exec(tag);
    if (!nm) throw new Error(`bad tag name at ${lt}: ${JSON.stringify(tag.slice(0, 20))}`);
    if (stack.length === 0) {
      if (closedRoot || root) throw new Error(`second root element <${nm[0]}>`);
      root = nm[0];
    }
    const attrs: Record<string, string> = {};
    let rest = tag.slice(nm[0].length);
    for (;;) {
      const ws = /^\s*/.exec(rest)![0];
      rest = rest.slice(ws.length);
      if (rest === '') break;
      if (ws === '') throw new Error(`attributes of <${nm[0]}> need whitespace between them`);
      const a = /^([A-Za-z_:][\w.:-]*)\s*=\s*("([^"<]*)"|'([^'<]*)')/.exec(rest);
      if (!a) throw new Error(`bad attribute in <${nm[0]}>: ${JSON.stringify(rest.slice(0, 30))}`);
      if (a[1] in attrs) throw new Error(`duplicate attribute ${a[1]} in <${nm[0]}>`);
      attrs[a[1]] = checkText(a[3] ?? a[4], lt);
      rest = rest.slice(a[0].length);
    }
    elements.push(nm[0]);
    attributes.push(attrs);
    if (!selfClosing) stack.push(nm[0]);
    else if (stack.length === 0) closedRoot = true;
    i = gt + 1;
  }
  if (stack.length) throw new Error(`unclosed <${stack[stack.length - 1]}>`);
  if (!root) throw new Error('no root element');
  return { root, elements, attributes, text };
}
