// The payload codec, its keyring and its HTTP server, without Temporal: what an old key still
// decodes after a rotation, what a tampered or unknown payload does, and who the server answers.
import { ApplicationFailure, defaultPayloadConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import crypto from 'node:crypto';
import fs from 'node:fs';
import zlib from 'node:zlib';
import { temporal } from '@temporalio/proto';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { startCodecServer, type CodecServer } from '../../src/codec/codec-server';
import { payloadKeyring, workerDataConverter } from '../../src/codec/data-converter';
import { DEFLATE_DICTIONARY_1 } from '../../src/codec/deflate-dictionary';
import { EncryptionCodec, KEY_ID_METADATA } from '../../src/codec/encryption-codec';
import { failureConverter } from '../../src/codec/failure-converter';
import { PLAINTEXT_REFUSED, PLAINTEXT_REFUSED_ENCODING } from '../../src/codec/plaintext';
import { UNDECODABLE_ENCODING } from '../../src/codec/payload-converter';
import { newKeyEntry, parseKeyring } from '../../src/codec/keyring';
import { registerSelf } from '../../tools/src/stack/processes';

const customer = { email: 'alice@example.test', amount: 4321, note: 'box arrived crushed' };
const plain = () => defaultPayloadConverter.toPayload(customer);
const keyId = (p: Payload) => Buffer.from(p.metadata![KEY_ID_METADATA]!).toString();
const [oldKey, newKey] = [newKeyEntry(new Date('2026-01-01')), newKeyEntry(new Date('2026-11-30'))];

test('a payload is ciphertext under the newest key and decodes to what was encoded', async () => {
  const codec = new EncryptionCodec(parseKeyring(`${newKey},${oldKey}`, 'test'));
  const [sealed] = await codec.encode([plain()]);
  expect(keyId(sealed!)).toBe(newKey.split(':')[0]);
  expect(Buffer.from(sealed!.data!).toString('latin1')).not.toMatch(/alice|4321|crushed/);
  const [opened] = await codec.decode([sealed!]);
  expect(defaultPayloadConverter.fromPayload(opened!)).toEqual(customer);
  // Two encodings of the same value differ (a fresh nonce each time).
  const [again] = await codec.encode([plain()]);
  expect(Buffer.from(again!.data!).equals(Buffer.from(sealed!.data!))).toBe(false);
});

test('after a rotation, a payload written with the old key still decodes; without the old key it names the key it lacks', async () => {
  const [written] = await new EncryptionCodec(parseKeyring(oldKey, 'before')).encode([plain()]);
  const rotated = new EncryptionCodec(parseKeyring(`${newKey}\n${oldKey}`, 'after'));
  expect(defaultPayloadConverter.fromPayload((await rotated.decode([written!]))[0]!)).toEqual(customer);
  expect(keyId((await rotated.encode([plain()]))[0]!)).toBe(newKey.split(':')[0]);
  await expect(new EncryptionCodec(parseKeyring(newKey, 'retired')).decode([written!])).rejects.toThrow(
    `encrypted with key ${oldKey.split(':')[0]}, which this process does not have`,
  );
});

test('a tampered payload or a relabelled key id fails authentication; a plaintext payload passes through', async () => {
  const codec = new EncryptionCodec(parseKeyring(`${newKey},${oldKey}`, 'test'));
  const [sealed] = await codec.encode([plain()]);
  const flipped = Buffer.from(sealed!.data!);
  flipped[20] = flipped[20]! ^ 1;
  await expect(codec.decode([{ ...sealed!, data: flipped }])).rejects.toThrow(/failed authentication/);
  const relabelled = {
    ...sealed!,
    metadata: { ...sealed!.metadata, [KEY_ID_METADATA]: Buffer.from(oldKey.split(':')[0]!) },
  };
  await expect(codec.decode([relabelled])).rejects.toThrow(/failed authentication/);
  expect(await codec.decode([plain()])).toEqual([plain()]);
});

test('a payload worth it is deflated inside its encryption; sealed either way, it opens under both settings, and a deflated one that does not inflate says so', async () => {
  const keyring = parseKeyring(newKey, 'test');
  const [deflating, plainSealing] = [new EncryptionCodec(keyring), new EncryptionCodec(keyring, { compress: false })];
  const ledger = { ledger: Array.from({ length: 8 }, (_, attempt) => ({ attempt, outcome: 'ok', reason: null })) };
  const big = defaultPayloadConverter.toPayload(ledger);
  const small = defaultPayloadConverter.toPayload(7);
  const [[deflated], [undeflated]] = await Promise.all([deflating.encode([big]), plainSealing.encode([big])]);
  expect(deflated!.data!.length).toBeLessThan(undeflated!.data!.length / 2);
  // Too small to gain: sealed alike.
  const [[a], [b]] = await Promise.all([deflating.encode([small]), plainSealing.encode([small])]);
  expect(a!.data!.length).toBe(b!.data!.length);
  for (const codec of [deflating, plainSealing])
    for (const sealed of [deflated!, undeflated!])
      expect(defaultPayloadConverter.fromPayload((await codec.decode([sealed]))[0]!)).toEqual(ledger);
  // Authentic ciphertexts: a deflate stream of the widest window, bytes that are none, one that inflates past the bound.
  const forged = (plaintext: Buffer) => ({ ...deflated!, data: sealedRaw(keyring, plaintext) });
  const marked = (deflatedBytes: Buffer) => forged(Buffer.concat([Buffer.of(1), deflatedBytes]));
  const serialized = Buffer.from(temporal.api.common.v1.Payload.encode(big).finish());
  const wide = marked(zlib.deflateRawSync(serialized, { dictionary: DEFLATE_DICTIONARY_1, windowBits: 15 }));
  expect(defaultPayloadConverter.fromPayload((await deflating.decode([wide]))[0]!)).toEqual(ledger);
  const bomb = marked(zlib.deflateRawSync(Buffer.alloc(65 << 20), { dictionary: DEFLATE_DICTIONARY_1 }));
  await expect(deflating.decode([bomb])).rejects.toThrow(/do not inflate/);
  const garbage = marked(Buffer.of(0xff, 0xff, 0xff));
  // A worker marks it, as any payload it cannot decode, rather than failing the task that carries it.
  const config = loadConfig({ PAYLOAD_KEYS: newKey, PAYLOAD_PLAINTEXT: 'allow' });
  const [asMarked] = await workerDataConverter(config, keyring).payloadCodecs![0]!.decode([garbage]);
  expect(Buffer.from(asMarked!.metadata!.encoding!).toString()).toBe(UNDECODABLE_ENCODING);
  expect(Buffer.from(asMarked!.data!).toString()).toMatch(/decrypts, but its deflated contents do not inflate/);
  await expect(deflating.decode([garbage])).rejects.toThrow(/decrypts, but its deflated contents do not inflate/);
  // Histories hold payloads deflated against it: the dictionary is fixed for good (a new one takes a new marker).
  expect(crypto.createHash('sha256').update(DEFLATE_DICTIONARY_1).digest('hex')).toBe(
    'acd59869e1409576d2b8f636d3ca9df4f125823192dfd17b2fbdedb75a016535',
  );
  expect(loadConfig({ PAYLOAD_KEYS: newKey }).encryption.compress).toBe(true);
  expect(loadConfig({ PAYLOAD_KEYS: newKey, PAYLOAD_COMPRESSION: 'off' }).encryption.compress).toBe(false);
});

/** `plaintext` encrypted under the keyring's current key, as the codec seals (nonce, ciphertext, tag). */
function sealedRaw(keyring: ReturnType<typeof parseKeyring>, plaintext: Buffer): Buffer {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', keyring.keys.get(keyring.current)!, iv);
  cipher.setAAD(Buffer.from(keyring.current));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]);
}

test("PAYLOAD_PLAINTEXT: a worker refuses a workflow's own plaintext payload, naming the codec endpoint; activities' payloads, clients and allow are untouched", async () => {
  const codecOf = (env: NodeJS.ProcessEnv) => {
    const config = loadConfig({ PAYLOAD_KEYS: newKey, CODEC_PORT: '9999', ...env });
    expect(config.encryption.plaintext).toBe(env.PAYLOAD_PLAINTEXT ?? 'reject');
    return workerDataConverter(config, config.encryption.keys).payloadCodecs![0] as PayloadCodec;
  };
  const workflow = { type: 'workflow', namespace: 'default', workflowId: 'w' } as const;
  const encoding = (p: Payload | undefined) => Buffer.from(p!.metadata!.encoding!).toString();
  const refuser = codecOf({});
  const [refused] = await refuser.decode([plain()], workflow);
  expect(encoding(refused)).toBe(PLAINTEXT_REFUSED_ENCODING);
  expect(Buffer.from(refused!.data!).toString()).toMatch(
    /^plaintext payload refused .*--codec-endpoint http:\/\/127\.0\.0\.1:9999/,
  );
  // What the workers sealed decodes; an activity's payload comes from our own workers only.
  const [sealed] = await refuser.encode([plain()], workflow);
  expect(defaultPayloadConverter.fromPayload((await refuser.decode([sealed!], workflow))[0]!)).toEqual(customer);
  expect(await refuser.decode([plain()], { type: 'activity', namespace: 'default', isLocal: false })).toEqual([
    plain(),
  ]);
  expect(await codecOf({ PAYLOAD_PLAINTEXT: 'allow' }).decode([plain()], workflow)).toEqual([plain()]);

  // Encryption off: everything is plaintext, so allow is implied and reject is a configuration error.
  expect(loadConfig({ PAYLOAD_ENCRYPTION: 'off' }).encryption.plaintext).toBe('allow');
  expect(() => loadConfig({ PAYLOAD_ENCRYPTION: 'off', PAYLOAD_PLAINTEXT: 'reject' })).toThrow(
    /PAYLOAD_PLAINTEXT: reject needs PAYLOAD_ENCRYPTION=on/,
  );
  expect(() => loadConfig({ PAYLOAD_PLAINTEXT: 'refuse' })).toThrow(/PAYLOAD_PLAINTEXT/);

  // The refusal's failure keeps its message in the clear for a caller without the codec; any other is encoded.
  const pc = defaultPayloadConverter;
  const clear = failureConverter.errorToFailure(
    ApplicationFailure.nonRetryable('plaintext payload refused', PLAINTEXT_REFUSED),
    pc,
  );
  expect(clear).toMatchObject({ message: 'plaintext payload refused', stackTrace: '' });
  expect(clear.encodedAttributes).toBeFalsy();
  const other = failureConverter.errorToFailure(ApplicationFailure.nonRetryable('c***@example.test bounced', 'X'), pc);
  expect(other.message).toBe('Encoded failure');
});

test.each([
  ['', /no keys/],
  ['k1', /is not id:base64key/],
  ['bad id:AAAA', /is not id:base64key/],
  [`k1:${Buffer.alloc(16).toString('base64')}`, /key k1 is not 32 bytes/],
  [`k1:${Buffer.alloc(32).toString('base64')},k1:${Buffer.alloc(32, 1).toString('base64')}`, /k1 appears twice/],
])('PAYLOAD_KEYS %j is refused: %s', (keys, error) => {
  expect(() => loadConfig({ PAYLOAD_KEYS: keys || ' ' })).toThrow(error);
});

test("without keys, the stack's own dev server gets a key file of the stack's own; any other server is refused unless encryption is off", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keys-'));
  // A server on loopback the stack did not start (a tunnel or a port forward to production) gets no made-up key.
  expect(() => payloadKeyring(loadConfig({ DATA_DIR: dir }))).toThrow(
    /no payload keys are set, and Temporal at 127.0.0.1:7233 is not the dev server this stack runs under/,
  );
  expect(fs.existsSync(path.join(dir, 'payload-keys'))).toBe(false);
  const unregister = registerSelf(dir, 'temporal', process.argv[1]!);
  const local = payloadKeyring(loadConfig({ DATA_DIR: dir }))!;
  expect(fs.statSync(path.join(dir, 'payload-keys')).mode & 0o777).toBe(0o600);
  expect(payloadKeyring(loadConfig({ DATA_DIR: dir }))!.current).toBe(local.current);
  expect(() => payloadKeyring(loadConfig({ DATA_DIR: dir, TEMPORAL_ADDRESS: 'temporal.example.com:7233' }))).toThrow(
    /set PAYLOAD_KEYS \(or PAYLOAD_KEYS_FILE\)/,
  );
  unregister();
  expect(
    payloadKeyring(loadConfig({ TEMPORAL_ADDRESS: 'temporal.example.com:7233', PAYLOAD_ENCRYPTION: 'off' })),
  ).toBeUndefined();
  expect(
    payloadKeyring(loadConfig({ TEMPORAL_ADDRESS: 'temporal.example.com:7233', PAYLOAD_KEYS: newKey }))!.current,
  ).toBe(newKey.split(':')[0]);
  expect(() => payloadKeyring(loadConfig({ PAYLOAD_KEYS_FILE: path.join(dir, 'missing') }))).toThrow(
    /PAYLOAD_KEYS_FILE .* does not exist/,
  );
});

test('a codec server off loopback needs a token, or an authenticating proxy said to be in front of it', () => {
  expect(() => loadConfig({ CODEC_HOST: '0.0.0.0' })).toThrow(
    /CODEC_HOST: the codec server decrypts for anyone who reaches it/,
  );
  expect(loadConfig({ CODEC_HOST: '0.0.0.0', CODEC_AUTH_TOKEN: 'a-token-of-16-chars' }).codec.authToken).toBe(
    'a-token-of-16-chars',
  );
  expect(loadConfig({ CODEC_HOST: '0.0.0.0', CODEC_AUTH: 'proxy' }).codec.endpoint).toBe('http://127.0.0.1:8888');
  expect(loadConfig({ CODEC_HOST: '::1' }).codec.endpoint).toBe('http://[::1]:8888');
});

describe('the codec server', () => {
  const ui = 'http://localhost:8233';
  let server: CodecServer;
  const codec = new EncryptionCodec(parseKeyring(newKey, 'test'));
  beforeAll(async () => {
    server = await startCodecServer({
      codec,
      namespace: 'payments',
      origins: [ui],
      authToken: 'a-token-of-16-chars',
      port: 0,
    });
  });
  afterAll(() => server.close());

  const body = async (payloads: Payload[]) => ({
    payloads: payloads.map((p) => ({
      metadata: Object.fromEntries(Object.entries(p.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      data: Buffer.from(p.data!).toString('base64'),
    })),
  });
  const post = (action: string, payload: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}/some/prefix/${action}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer a-token-of-16-chars',
        'x-namespace': 'payments',
        origin: ui,
        ...headers,
      },
      body: JSON.stringify(payload),
    });

  test("decodes for the Web UI's origin, with CORS headers, and encodes", async () => {
    const res = await post('decode', await body(await codec.encode([plain()])));
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(ui);
    const { payloads } = (await res.json()) as { payloads: { data: string }[] };
    expect(JSON.parse(Buffer.from(payloads[0]!.data, 'base64').toString())).toEqual(customer);
    const encoded = (await (await post('encode', await body([plain()]))).json()) as { payloads: { data: string }[] };
    expect(Buffer.from(encoded.payloads[0]!.data, 'base64').toString('latin1')).not.toMatch(/alice/);
    const preflight = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: {
        origin: ui,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,x-namespace',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/X-Namespace/);
  });

  test('refuses another origin, another namespace, a missing token, and a body that is not Payloads', async () => {
    const sealed = await body(await codec.encode([plain()]));
    expect((await post('decode', sealed, { origin: 'http://evil.test' })).status).toBe(403);
    const other = await post('decode', sealed, { 'x-namespace': 'other' });
    expect(other.status).toBe(403);
    expect(await other.json()).toEqual({ error: 'this codec server holds the keys of namespace payments, not other' });
    expect((await post('decode', sealed, { authorization: 'Bearer wrong-token-of-16-ch' })).status).toBe(401);
    expect((await post('decode', { payloads: [{ data: '!!!' }] })).status).toBe(400);
    expect((await post('other', sealed)).status).toBe(404);
    const evil = await fetch(`${server.url}/decode`, { method: 'OPTIONS', headers: { origin: 'http://evil.test' } });
    expect(evil.status).toBe(403);
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
  });
});
