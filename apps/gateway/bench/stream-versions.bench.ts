// The CPU an OpenAI stream's version rewrite costs per event (`openai_stream_versions`), side by side with one
// copy of the same event (the floor of any rewrite): `pnpm --filter @uis/gateway bench:stream-versions`. Both
// ways the relay uses it: events in and out (`push`), and reframed (the engine's chunked reads in, one chunk out
// per read, as an HTTP/1.1 client gets it).
// The event is SGLang 0.5.23's chat chunk with continuous usage (serving_chat.py), about 430 bytes.
import { OpenAIStreamVersions } from '../src/proxy/openai-stream-versions.ts';

const EVENTS = 200_000;
const ROUNDS = 5;
const usage = (n: number) =>
  `{"prompt_tokens":12,"total_tokens":${12 + n},"completion_tokens":${n},"prompt_tokens_details":null,"reasoning_tokens":0,"completion_tokens_details":null}`;
const event = (n: number) =>
  Buffer.from(
    `data: {"id":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","object":"chat.completion.chunk","created":1733400000,"model":"policy","choices":[{"index":0,"delta":{"role":null,"content":" tok","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":${usage(n)}}\n\n`,
  );
const answer = Array.from({ length: 1000 }, (_, i) => event(i + 1));
/** Each event as uvicorn frames it, one chunk per read. */
const framed = answer.map((e) =>
  Buffer.concat([Buffer.from(`${e.length.toString(16)}\r\n`), e, Buffer.from('\r\n')]),
);
const resumes = { count: 0, to: [] as string[] };

/** CPU microseconds per event, one answer of 1,000 events after another. */
function perEvent(run: (s: OpenAIStreamVersions, ev: Buffer) => number, reframe = false): number {
  const make = () => {
    const s = new OpenAIStreamVersions(true, () => resumes, 'v1', 0);
    if (reframe) s.reframe();
    return s;
  };
  let s = make();
  let bytes = 0;
  const input = reframe ? framed : answer;
  const t = process.cpuUsage();
  for (let i = 0; i < EVENTS; i++) {
    if (i % 1000 === 0) s = make();
    bytes += run(s, input[i % 1000] as Buffer);
  }
  const u = process.cpuUsage(t);
  if (bytes === 0) throw new Error('nothing relayed');
  return (u.user + u.system) / EVENTS;
}

const ratios: number[] = [];
const reframed: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const rewrite = perEvent((s, ev) => s.push(ev).length);
  const chunked = perEvent((s, ev) => s.push(ev).length, true);
  const copy = perEvent((_s, ev) => Buffer.from(ev).length);
  ratios.push(rewrite / copy);
  reframed.push(chunked / copy);
  console.log(
    `round ${r + 1}: rewrite ${rewrite.toFixed(2)} us/event, reframed ${chunked.toFixed(2)} us/event, copy ${copy.toFixed(2)} us/event`,
  );
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(1);
console.log(`rewrite / copy, median of ${ROUNDS}: ${median(ratios)}x; reframed / copy: ${median(reframed)}x`);
