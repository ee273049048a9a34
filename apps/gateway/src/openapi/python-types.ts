import type { JsonSchema } from './json-schema.ts';

/** Whether a type appears in what a client gets (`out`: pydantic models, lists) or in what it sends (`in`:
 * TypedDicts, Sequence and Mapping so a caller's list or dict of a narrower type is accepted). */
export type Mode = 'in' | 'out';

const KEYWORDS = new Set(
  'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield'.split(
    ' ',
  ),
);

/** `drain_model` -> `DrainModel`. */
export const pascal = (s: string) =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter((w) => w !== '')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

/** A JSON value as a Python literal. */
export function pyLiteral(value: unknown): string {
  if (value === null) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number' || typeof value === 'string') return JSON.stringify(value);
  throw new Error(`no Python literal for ${JSON.stringify(value)}`);
}

/** A field or parameter name as Python may write it; a keyword (`from`) gets a trailing underscore. */
export function pyName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`${JSON.stringify(name)} is not a Python name`);
  return KEYWORDS.has(name) ? `${name}_` : name;
}

/** Whether a JSON Schema (after $ref) is JSON itself: any of string, number, boolean, null, array, object. */
function isJsonValue(s: JsonSchema): boolean {
  const kinds = ((s.anyOf ?? []) as JsonSchema[]).map((m) => m.type);
  return ['string', 'number', 'boolean', 'null', 'array', 'object'].every((k) => kinds.includes(k));
}

interface Emitted {
  /** The schema it was made from, to refuse two shapes under one name. */
  shape: string;
  code: string;
}

/**
 * The Python types of a set of JSON Schemas (OpenAPI 3.1, as `jsonSchemaOf` writes them): primitives, `Literal`s,
 * unions, lists and dicts inline, objects as classes named by their `title` or by where they occur (`hint`).
 * Classes are emitted after the classes they use, once per name; a name given to two shapes is an error.
 */
export class PythonTypes {
  private readonly classes = new Map<string, Emitted>();
  readonly used = new Set<string>();

  constructor(private readonly defs: Record<string, JsonSchema>) {}

  /** A name for a type (`UpdateWeightsBody: TypeAlias = A | B`), emitted like a class. */
  alias(name: string, type: string): string {
    if (type === name || !type.includes(' | ')) return type;
    if (this.classes.has(name)) throw new Error(`${name} is both a class and an alias`);
    this.used.add('TypeAlias');
    const one = `${name}: TypeAlias = ${type}`;
    const code = one.length <= 110 ? one : `${name}: TypeAlias = (\n    ${members(type).join('\n    | ')}\n)`;
    this.classes.set(name, { shape: type, code });
    return name;
  }

  /** The names of the classes. */
  names(): string[] {
    return [...this.classes.keys()];
  }

  /** The classes, in the order they were made (each after what it uses). */
  code(): string[] {
    return [...this.classes.values()].map((c) => c.code);
  }

  /** The Python type of `s`. */
  type(s: JsonSchema, hint: string, mode: Mode): string {
    if (typeof s.$ref === 'string') return this.ref(s.$ref);
    if ('const' in s) return this.literal([s.const]);
    if (Array.isArray(s.enum)) return this.literal(s.enum);
    const members = (s.anyOf ?? s.oneOf) as JsonSchema[] | undefined;
    if (members) return union(members.map((m, i) => this.type(m, memberHint(hint, m, i), mode)));
    if (Array.isArray(s.type))
      return union(s.type.map((t: unknown) => this.type({ ...s, type: t }, hint, mode)));
    switch (s.type) {
      case 'string':
        return 'str';
      case 'integer':
        return 'int';
      case 'number':
        return 'float';
      case 'boolean':
        return 'bool';
      case 'null':
        return 'None';
      case 'array':
        return `${this.use(mode === 'out' ? 'list' : 'Sequence')}[${this.type((s.items ?? {}) as JsonSchema, `${hint}Item`, mode)}]`;
      case 'object':
        return this.object(s, hint, mode);
    }
    if (Object.keys(s).every((k) => k === 'description' || k === 'title' || k === 'default'))
      return this.use('JsonValue');
    throw new Error(`${hint}: no Python type for ${JSON.stringify(s)}`);
  }

  private use(name: string): string {
    this.used.add(name);
    return name;
  }

  private literal(values: unknown[]): string {
    return `${this.use('Literal')}[${values.map(pyLiteral).join(', ')}]`;
  }

  private ref(ref: string): string {
    const name = ref.replace('#/components/schemas/', '');
    const def = this.defs[name];
    if (def === undefined) throw new Error(`unknown $ref ${ref}`);
    if (isJsonValue(def)) return this.use('JsonValue');
    throw new Error(`${ref}: only the JSON value is shared by reference; inline this schema`);
  }

  private object(s: JsonSchema, hint: string, mode: Mode): string {
    const props = (s.properties ?? {}) as Record<string, JsonSchema>;
    if (Object.keys(props).length === 0) {
      const values = s.additionalProperties;
      const of =
        typeof values === 'object' && values !== null
          ? this.type(values as JsonSchema, `${hint}Value`, mode)
          : this.use('JsonValue');
      return `${mode === 'out' ? 'dict' : this.use('Mapping')}[str, ${of}]`;
    }
    const name = typeof s.title === 'string' ? s.title : hint;
    const shape = JSON.stringify([mode, s]);
    const seen = this.classes.get(name);
    if (seen !== undefined) {
      if (seen.shape !== shape) throw new Error(`two different shapes are both named ${name}`);
      return name;
    }
    const required = new Set((s.required ?? []) as string[]);
    const fields = Object.entries(props).map(([field, schema]) => ({
      field,
      required: required.has(field),
      type: this.type(schema, `${name}${pascal(field)}`, mode),
    }));
    const code = mode === 'out' ? this.model(name, fields) : this.typedDict(name, fields);
    this.classes.set(name, { shape, code });
    return name;
  }

  /** A pydantic model of an answer: a field the schema may leave out defaults to None. */
  private model(name: string, fields: Array<{ field: string; required: boolean; type: string }>): string {
    const lines = fields.map(({ field, required, type }) => {
      const py = pyName(field);
      const optional = required ? type : union([type, 'None']);
      if (py === field) return `    ${py}: ${optional}${required ? '' : ' = None'}`;
      this.use('Field');
      return `    ${py}: ${optional} = Field(${required ? '' : 'default=None, '}alias=${JSON.stringify(field)})`;
    });
    return `class ${name}(_Model):\n${lines.join('\n')}`;
  }

  /** A TypedDict of what a caller sends: required keys in a base class, optional ones in a `total=False` class
   * (typing.NotRequired needs Python 3.11). */
  private typedDict(name: string, fields: Array<{ field: string; required: boolean; type: string }>): string {
    this.use('TypedDict');
    for (const { field } of fields)
      if (pyName(field) !== field) throw new Error(`${name}.${field}: a TypedDict key must be a Python name`);
    const body = (list: typeof fields) => list.map((f) => `    ${f.field}: ${f.type}`).join('\n');
    const required = fields.filter((f) => f.required);
    const optional = fields.filter((f) => !f.required);
    if (optional.length === 0) return `class ${name}(TypedDict):\n${body(required)}`;
    if (required.length === 0) return `class ${name}(TypedDict, total=False):\n${body(optional)}`;
    return `class _${name}Required(TypedDict):\n${body(required)}\n\n\nclass ${name}(_${name}Required, total=False):\n${body(optional)}`;
  }
}

/** A union's member name: its title, else its constant fields (`{"source": "disk"}` -> `<hint>Disk`), else its
 * position. */
function memberHint(hint: string, member: JsonSchema, i: number): string {
  // A union within a union: its own members name themselves.
  if (member.anyOf !== undefined || member.oneOf !== undefined) return hint;
  const props = Object.values((member.properties ?? {}) as Record<string, JsonSchema>);
  const consts = props.filter((p) => 'const' in p).map((p) => pascal(String(p.const)));
  return consts.length > 0 ? `${hint}${consts.join('')}` : `${hint}${i + 1}`;
}

/** The members of a union type written `A | list[B | None] | None` (at the top level only). */
function members(type: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < type.length; i++) {
    const c = type[i];
    if (c === '[') depth++;
    else if (c === ']') depth--;
    else if (depth === 0 && type.startsWith(' | ', i)) {
      out.push(type.slice(start, i));
      start = i + 3;
    }
  }
  return [...out, type.slice(start)];
}

/** `A | B | None`, each member once, None last; JSON already holds null. */
export function union(types: string[]): string {
  const flat = [...new Set(types.flatMap(members))];
  const some = flat.filter((t) => t !== 'None');
  if (some.includes('JsonValue')) return 'JsonValue';
  return [...some, ...(some.length < flat.length ? ['None'] : [])].join(' | ');
}
