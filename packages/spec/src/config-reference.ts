/** Renders the config file's JSON Schema as a Markdown reference: one table per object, one row per field, with
 * its type, whether it is required, its default and its limits. Generated, never edited by hand. */
type Schema = Record<string, unknown>;

interface Row {
  field: string;
  type: string;
  required: boolean;
  default: string;
  limits: string;
}

const code = (v: unknown) => `\`${JSON.stringify(v)}\``;

function typeOf(s: Schema): string {
  if (s.const !== undefined) return code(s.const);
  if (Array.isArray(s.enum)) return s.enum.map(code).join(' \\| ');
  if (s.type === 'array') return `array of ${typeOf((s.items ?? {}) as Schema)}`;
  if (s.type === 'object' && !s.properties && s.additionalProperties && s.additionalProperties !== true) {
    return `map of ${typeOf(s.additionalProperties as Schema)}`;
  }
  if (s.type === 'object' && !s.properties) return 'object';
  return String(s.type ?? 'any');
}

function limitsOf(s: Schema): string {
  const parts: string[] = [];
  if (s.exclusiveMinimum !== undefined) parts.push(`> ${s.exclusiveMinimum}`);
  if (s.minimum !== undefined) parts.push(`>= ${s.minimum}`);
  if (s.maximum !== undefined && s.maximum !== Number.MAX_SAFE_INTEGER) parts.push(`<= ${s.maximum}`);
  if (s.minLength !== undefined && s.minLength !== 1) parts.push(`length >= ${s.minLength}`);
  if (s.minLength === 1) parts.push('not empty');
  if (s.minItems !== undefined) parts.push(`at least ${s.minItems} item${s.minItems === 1 ? '' : 's'}`);
  if (typeof s.pattern === 'string') parts.push(`matches \`${s.pattern}\``);
  const items = s.items as Schema | undefined;
  if (items && items.type !== 'object') {
    const inner = limitsOf(items);
    if (inner) parts.push(`each ${inner}`);
  }
  return parts.join(', ');
}

/** The object schema a field leads to (itself, its array items or its map values), if any. */
function nested(s: Schema): Schema | undefined {
  if (s.properties) return s;
  const items = s.items as Schema | undefined;
  if (items?.properties) return items;
  const values = s.additionalProperties as Schema | undefined;
  if (values && typeof values === 'object' && values.properties) return values;
  return undefined;
}

function suffix(s: Schema): string {
  if ((s.items as Schema | undefined)?.properties) return '[]';
  const values = s.additionalProperties as Schema | undefined;
  if (values && typeof values === 'object' && values.properties) return '.<name>';
  return '';
}

/** Walks objects depth first; sibling fields with the same schema (e.g. the three roles) render once. */
function sections(path: string, s: Schema, out: Array<{ path: string; rows: Row[] }>): void {
  const props = (s.properties ?? {}) as Record<string, Schema>;
  const required = new Set((s.required ?? []) as string[]);
  out.push({
    path,
    rows: Object.entries(props).map(([field, p]) => ({
      field,
      type: typeOf(p),
      required: required.has(field),
      default: p.default === undefined ? '' : code(p.default),
      limits: limitsOf(p),
    })),
  });
  const seen = new Map<string, string[]>();
  for (const [field, p] of Object.entries(props)) {
    if (!nested(p)) continue;
    const key = JSON.stringify(p);
    seen.set(key, [...(seen.get(key) ?? []), field]);
  }
  for (const [key, fields] of seen) {
    const p = JSON.parse(key) as Schema;
    const name = fields.length === 1 ? fields[0] : `{${fields.join(',')}}`;
    sections(`${path ? `${path}.` : ''}${name}${suffix(p)}`, nested(p)!, out);
  }
}

export function configReferenceMarkdown(schema: Schema): string {
  const out: Array<{ path: string; rows: Row[] }> = [];
  sections('', schema, out);
  const lines = [
    '# UIS config file reference',
    '',
    '<!-- Generated from the zod schema of @uis/spec (packages/spec/gen-schema.ts); do not edit by hand. -->',
    '',
    `${schema.description ?? ''} JSON Schema: \`packages/spec/schema/uis-config.schema.json\` (\`@uis/spec/schema.json\`);`,
    'start a YAML file with `# yaml-language-server: $schema=<path to it>` for completion and checks in editors.',
    'The schema checks shapes and limits; `uis plan --config FILE` also checks the layout rules (capacity, TP sizes,',
    'overlaps, the schedule) that need the whole file.',
  ];
  for (const section of out) {
    if (section.rows.length === 0) continue;
    lines.push('', `## ${section.path === '' ? '(top level)' : `\`${section.path}\``}`, '');
    lines.push('| field | type | required | default | limits |', '| --- | --- | --- | --- | --- |');
    for (const r of section.rows) {
      lines.push(`| \`${r.field}\` | ${r.type} | ${r.required ? 'yes' : ''} | ${r.default} | ${r.limits} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}
