import { commandRoutes } from '@uis/control-plane';
import type { JsonSchema } from './json-schema.ts';
import { buildOpenApiDocument } from './openapi-document.ts';
import { type Mode, PythonTypes, pascal, pyLiteral, pyName, union } from './python-types.ts';

/**
 * The Python client's command methods and answer models, generated from the OpenAPI document of the command table
 * (`pnpm gen:python` writes them; `python-client.test.ts` fails when the committed files differ). Each admin
 * operation becomes a `Call` factory `<name>_call` and a method `<name>` of `Commands` (UisClient) and
 * `AsyncCommands` (AsyncUisClient), with the command's name, its path parameters and required fields positional,
 * its optional fields keyword-only, and its answer's `result` as a pydantic model.
 */

/** Where the generated files go, from the repository root. */
export const PYTHON_PACKAGE = 'clients/python/src/uis_client';

const HEADER = (what: string) =>
  `"""${what}

Generated from the command table (packages/control-plane/src/commands) through its OpenAPI document by
\`pnpm gen:python\` (apps/gateway/src/openapi/python-client.ts). Do not edit: change the table and regenerate."""`;

interface Param {
  name: string;
  type: string;
  /** A Python literal, or undefined when the caller must give it. */
  default?: string;
  where: 'path' | 'query' | 'body' | 'whole-body';
  field: string;
}

interface Operation {
  name: string;
  summary: string;
  method: 'GET' | 'POST';
  path: string;
  params: Param[];
  result: string;
  parse: string;
  admin: boolean;
  idempotent: boolean;
  waitsUpTo: string | null;
}

type Doc = {
  paths: Record<string, Record<string, JsonSchema>>;
  components: { schemas: Record<string, JsonSchema> };
};

/** The fields of an object schema as parameters: required ones first (in the schema's order), then optional ones
 * with their default (the schema's, else None: left out of the request). */
function fieldParams(
  types: PythonTypes,
  schema: JsonSchema,
  where: 'query' | 'body',
  hint: string,
  required: ReadonlySet<string>,
): Param[] {
  const props = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const params = Object.entries(props).map(([field, s]): Param => {
    const type = types.type(s, `${hint}${pascal(field)}`, 'in');
    if (required.has(field)) return { name: pyName(field), type, where, field };
    if ('default' in s) return { name: pyName(field), type, default: pyLiteral(s.default), where, field };
    return { name: pyName(field), type: union([type, 'None']), default: 'None', where, field };
  });
  return [...params.filter((p) => p.default === undefined), ...params.filter((p) => p.default !== undefined)];
}

function operation(types: PythonTypes, path: string, method: string, op: JsonSchema): Operation {
  const name = op.operationId as string;
  const hint = pascal(name);
  const parameters = (op.parameters ?? []) as Array<{
    name: string;
    in: string;
    required: boolean;
    schema: JsonSchema;
  }>;
  const params: Param[] = parameters
    .filter((p) => p.in === 'path')
    .map((p) => ({
      name: pyName(p.name),
      type: types.type(p.schema, hint, 'in'),
      where: 'path',
      field: p.name,
    }));
  const query = parameters.filter((p) => p.in === 'query');
  if (query.length > 0) {
    const schema = { properties: Object.fromEntries(query.map((p) => [p.name, p.schema])) };
    params.push(
      ...fieldParams(
        types,
        schema,
        'query',
        hint,
        new Set(query.filter((p) => p.required).map((p) => p.name)),
      ),
    );
  }
  const body = (op.requestBody as JsonSchema | undefined)?.content as
    | Record<string, { schema: JsonSchema }>
    | undefined;
  const bodySchema = body?.['application/json']?.schema;
  if (bodySchema?.type === 'object')
    params.push(
      ...fieldParams(types, bodySchema, 'body', hint, new Set((bodySchema.required ?? []) as string[])),
    );
  else if (bodySchema !== undefined)
    params.push({
      name: 'body',
      type: types.alias(`${hint}Body`, types.type(bodySchema, `${hint}Body`, 'in')),
      where: 'whole-body',
      field: 'body',
    });
  const names = params.map((p) => p.name);
  if (new Set(names).size !== names.length || names.includes('operation_id'))
    throw new Error(`${name}: parameter names collide (${names.join(', ')})`);
  const answer = (op.responses as JsonSchema)['200'] as JsonSchema;
  const envelope = (answer.content as Record<string, { schema: JsonSchema }>)['application/json']!.schema;
  const result = (envelope.properties as Record<string, JsonSchema>).result!;
  const resultType = types.type(result, `${hint}Result`, 'out' satisfies Mode);
  if (resultType !== 'None' && !/^[A-Z]\w*$/.test(resultType))
    throw new Error(`${name}: an answer's result must be null or an object, not ${resultType}`);
  const waitsUpTo = (op['x-uis-waits-up-to'] as string | undefined) ?? null;
  if (waitsUpTo !== null && params.find((p) => p.field === waitsUpTo)?.default === undefined)
    throw new Error(`${name}: the wait's ${waitsUpTo} needs a default`);
  return {
    name,
    summary: op.summary as string,
    method: method.toUpperCase() as 'GET' | 'POST',
    path,
    params,
    result: resultType,
    parse: resultType === 'None' ? 'no_result' : `result_of(${resultType})`,
    admin: op['x-uis-permission'] === 'admin',
    idempotent: op['x-uis-idempotent'] === true,
    waitsUpTo,
  };
}

/** `def name(a: str, *, b: int | None = None) -> R:` on one line, or one parameter a line when too long. */
function signature(prefix: string, params: string[], returns: string): string {
  const one = `${prefix}(${params.join(', ')}) -> ${returns}:`;
  if (one.length <= 110) return one;
  const indent = ' '.repeat(prefix.length - prefix.trimStart().length + 4);
  return `${prefix}(\n${params.map((p) => `${indent}${p},`).join('\n')}\n${indent.slice(4)}) -> ${returns}:`;
}

function paramList(op: Operation, self: boolean): string[] {
  const out = self ? ['self'] : [];
  const required = op.params.filter((p) => p.default === undefined);
  const optional = op.params.filter((p) => p.default !== undefined);
  out.push(...required.map((p) => `${p.name}: ${p.type}`));
  if (optional.length > 0 || (self && op.idempotent)) out.push('*');
  out.push(...optional.map((p) => `${p.name}: ${p.type} = ${p.default}`));
  if (self && op.idempotent) out.push('operation_id: str | None = None');
  return out;
}

function docstring(text: string, indent: string): string {
  const words = text.replace(/\\/g, '\\\\').replace(/"""/g, '\\"\\"\\"').split(/\s+/);
  const lines: string[] = [];
  let line = '';
  for (const w of words) {
    if (line !== '' && indent.length + 3 + line.length + 1 + w.length > 110) {
      lines.push(line);
      line = w;
    } else line = line === '' ? w : `${line} ${w}`;
  }
  lines.push(line);
  return `${indent}"""${lines.join(`\n${indent}`)}"""`;
}

function callFactory(op: Operation): string {
  const path = op.path.replace(/\{([a-z_]+)\}/g, (_m, p: string) => `{q(${pyName(p)})}`);
  const args = [`"${op.method}"`, op.path.includes('{') ? `f"${path}"` : `"${path}"`, op.parse];
  const fields = (where: Param['where']) => op.params.filter((p) => p.where === where);
  const dict = (ps: Param[]) => {
    const given = ps.filter((p) => p.default === undefined).map((p) => `"${p.field}": ${p.name}`);
    const maybe = ps.filter((p) => p.default !== undefined).map((p) => `${p.name}=${p.name}`);
    if (maybe.length === 0) return `{${given.join(', ')}}`;
    if (given.length === 0) return `given(${maybe.join(', ')})`;
    return `{${given.join(', ')}, **given(${maybe.join(', ')})}`;
  };
  if (op.method === 'POST') {
    const whole = fields('whole-body')[0];
    args.push(`body=${whole ? `dict(${whole.name})` : dict(fields('body'))}`);
  }
  if (fields('query').length > 0) args.push(`params=query(${dict(fields('query'))})`);
  if (op.idempotent) args.push('mutation=True');
  if (!op.admin) args.push('admin=False');
  if (op.waitsUpTo !== null) args.push(`timeout=${pyName(op.waitsUpTo)} + WAIT_MARGIN_S`, 'retry=False');
  return [
    signature(`def ${op.name}_call`, paramList(op, false), `Call[${op.result}]`),
    `    return Call(\n${args.map((a) => `        ${a},`).join('\n')}\n    )`,
  ].join('\n');
}

function method(op: Operation, async: boolean): string {
  const forward = op.params.map((p) => (p.default === undefined ? p.name : `${p.name}=${p.name}`));
  const run = `self.run(${op.name}_call(${forward.join(', ')})${op.idempotent ? ', operation_id' : ''})`;
  return [
    signature(`    ${async ? 'async ' : ''}def ${op.name}`, paramList(op, true), op.result),
    docstring(op.summary, '        '),
    `        return ${async ? 'await ' : ''}${run}`,
  ].join('\n');
}

function mixin(ops: Operation[], async: boolean): string {
  const name = async ? 'AsyncCommands' : 'Commands';
  const client = async ? 'AsyncUisClient' : 'UisClient';
  return [
    `class ${name}(ABC):`,
    `    """Every command of the table as a method of its name (${client} runs them)."""`,
    '',
    '    @abstractmethod',
    `    ${async ? 'async ' : ''}def run(self, call: Call[T], operation_id: str | None = None) -> T:`,
    '        """Sends one call: token, operation id, retries, typed errors."""',
    ...ops.flatMap((op) => ['', method(op, async)]),
  ].join('\n');
}

/** The operations of the document's admin paths, in the table's order. */
function operations(doc: Doc, types: PythonTypes): Operation[] {
  return Object.entries(doc.paths)
    .filter(([path]) => path.startsWith('/admin/'))
    .flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => operation(types, path, method, op)));
}

/** `from M import a, b` for each module's names the code uses. */
function importsOf(code: string, modules: ReadonlyArray<readonly [string, readonly string[]]>): string[] {
  return modules.flatMap(([from, names]) => {
    const used = names.filter((n) => new RegExp(`\\b${n}\\b`).test(code)).sort();
    if (used.length === 0) return [];
    const one = `from ${from} import ${used.join(', ')}`;
    return [one.length <= 110 ? one : `from ${from} import (\n${used.map((n) => `    ${n},`).join('\n')}\n)`];
  });
}

const STANDARD = [
  ['abc', ['ABC', 'abstractmethod']],
  ['collections.abc', ['Mapping', 'Sequence']],
  ['typing', ['Literal', 'TypeAlias', 'TypedDict', 'TypeVar']],
] as const;

/** The generated files (path from the repository root, text) for an OpenAPI document with the admin routes. */
export function pythonClientFiles(doc: Doc): Array<{ path: string; text: string }> {
  const types = new PythonTypes(doc.components.schemas);
  const ops = operations(doc, types);
  const exported = types
    .names()
    .filter((n) => !n.startsWith('_'))
    .sort();
  const models = [
    `__all__ = [\n${exported.map((n) => `    "${n}",`).join('\n')}\n]`,
    '',
    '',
    'class _Model(BaseModel):',
    '    # Unknown fields are kept: a newer service may add fields without breaking an older client.',
    '    model_config = ConfigDict(extra="allow", populate_by_name=True)',
    ...types.code().flatMap((c) => ['', '', c]),
  ].join('\n');
  const commands = [
    'T = TypeVar("T")',
    ...ops.flatMap((op) => ['', '', callFactory(op)]),
    '',
    '',
    mixin(ops, false),
    '',
    '',
    mixin(ops, true),
  ].join('\n');
  const file = (what: string, imports: string[][], body: string) =>
    `${[HEADER(what), 'from __future__ import annotations', ...imports.filter((i) => i.length > 0).map((i) => i.join('\n'))].join('\n\n')}\n\n\n${body}\n`;
  return [
    {
      path: `${PYTHON_PACKAGE}/_models_gen.py`,
      text: file(
        'The typed answers (pydantic) and request bodies (TypedDict) of the admin commands.',
        [
          importsOf(models, STANDARD),
          importsOf(models, [['pydantic', ['BaseModel', 'ConfigDict', 'Field', 'JsonValue']]]),
        ],
        models,
      ),
    },
    {
      path: `${PYTHON_PACKAGE}/_commands_gen.py`,
      text: file(
        'Every admin command as a `Call` and as a method of the sync and async clients.',
        [
          importsOf(commands, STANDARD),
          importsOf(commands, [['pydantic', ['JsonValue']]]),
          importsOf(commands, [
            ['._calls', ['WAIT_MARGIN_S', 'Call', 'given', 'no_result', 'q', 'query', 'result_of']],
            ['._models_gen', types.names()],
          ]),
        ],
        commands,
      ),
    },
  ];
}

/** The generated files for the command table as it is now. */
export function currentPythonClient(): Array<{ path: string; text: string }> {
  return pythonClientFiles(buildOpenApiDocument({ roles: [], admin: commandRoutes() }) as Doc);
}
