import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, LOCAL_WEBHOOK_SECRET } from '../../src/config';
import { runSettings } from '../../src/deps';
import { telemetryOptions } from '../../src/observability/telemetry';
import { shutdownGraceMs } from '../../src/lifecycle/drain';
import { buildIdFor, deploymentOptions, deploymentVersion } from '../../src/lifecycle/deployment';

test('defaults point at the embedded stack on loopback', () => {
  const config = loadConfig({});
  expect(config.temporal.address).toBe('127.0.0.1:7233');
  expect(config.stripe).toMatchObject({ local: true, apiBase: 'http://127.0.0.1:4242' });
  expect(config.databaseUrl).toMatch(/^sqlite:.*orders\.db$/);
});

test('a real Stripe key without an API base talks to real Stripe, and then needs a scope for this environment', () => {
  expect(() => loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123' })).toThrow(/OPERATION_SCOPE: must name this environment/);
  const real = loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123', OPERATION_SCOPE: 'staging' });
  expect(real.stripe).toMatchObject({ local: false, apiBase: undefined });
  expect(real.scope).toBe('staging');
  expect(loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_API_BASE: 'http://127.0.0.1:9' }).stripe.local).toBe(
    true,
  );
  expect(loadConfig({}).scope).toBe('local');
});

test.each([
  [{ STRIPE_PORT: 'abc' }, /STRIPE_PORT/],
  [{ SMTP_PORT: '70000' }, /SMTP_PORT/],
  [{ STRIPE_API_BASE: 'not a url' }, /STRIPE_API_BASE/],
  [{ MAIL_FROM: 'nobody' }, /MAIL_FROM/],
  [{ OPERATION_SCOPE: 'Has Spaces' }, /OPERATION_SCOPE/],
  [{ OPERATION_SCOPE: 'checkout' }, /OPERATION_SCOPE: "checkout" is the scope of checkouts' refunds/],
  [{ FAULT_INJECTION: 'yes' }, /FAULT_INJECTION/],
  [{ STRIPE_TIMEOUT_MS: '5' }, /STRIPE_TIMEOUT_MS/],
  [{ DECIDERS: 'alice=boss' }, /DECIDERS: must be name=role/],
  [{ DECIDERS: 'alice' }, /DECIDERS/],
  [{ HEALTH_ADDRESS: '9464' }, /HEALTH_ADDRESS: must be host:port/],
  [{ HEALTH_ADDRESS: 'localhost:70000' }, /HEALTH_ADDRESS/],
  [{ SHUTDOWN_GRACE_MS: '-1' }, /SHUTDOWN_GRACE_MS/],
  [{ STICKY_TIMEOUT_MS: '10' }, /STICKY_TIMEOUT_MS/],
])('a bad environment %j is refused naming the variable', (env, message) => {
  expect(() => loadConfig(env)).toThrow(message);
});

test("metrics are off unless an exporter is set, one at most; the Core's logs follow LOG_LEVEL into pino either way", () => {
  expect(telemetryOptions(loadConfig({}))).toEqual({
    logging: { forward: {}, filter: { core: 'INFO', other: 'WARN' } },
  });
  expect(telemetryOptions(loadConfig({ LOG_LEVEL: 'error', METRICS_PROMETHEUS_ADDRESS: '0.0.0.0:9464' }))).toEqual({
    logging: { forward: {}, filter: { core: 'ERROR', other: 'ERROR' } },
    metrics: { prometheus: { bindAddress: '0.0.0.0:9464' } },
  });
  expect(telemetryOptions(loadConfig({ METRICS_OTLP_URL: 'grpc://collector:4317' })).metrics).toEqual({
    otel: { url: 'grpc://collector:4317', http: false },
  });
  expect(telemetryOptions(loadConfig({ METRICS_OTLP_URL: 'https://collector/v1/metrics' })).metrics).toEqual({
    otel: { url: 'https://collector/v1/metrics', http: true },
  });
  expect(() => loadConfig({ METRICS_PROMETHEUS_ADDRESS: '9464' })).toThrow(
    /METRICS_PROMETHEUS_ADDRESS: must be host:port/,
  );
  expect(() => loadConfig({ METRICS_OTLP_URL: 'collector:4317' })).toThrow(/METRICS_OTLP_URL/);
  expect(() =>
    loadConfig({ METRICS_PROMETHEUS_ADDRESS: '127.0.0.1:9464', METRICS_OTLP_URL: 'grpc://collector:4317' }),
  ).toThrow(/METRICS_OTLP_URL: .*not both/);
});

test('the timeouts nest: a Stripe request ends inside its attempt, and the key window is trusted only up to a margin', () => {
  expect(() => runSettings(loadConfig({ STRIPE_TIMEOUT_MS: '14000' }))).toThrow(
    /STRIPE_TIMEOUT_MS \(14000\) must end at least 2000 ms inside the policy's stripe startToCloseMs \(15000\)/,
  );
  const settings = runSettings(loadConfig({}));
  expect(settings.provider).toEqual({ dedupeWindowMs: 23 * 3600_000, consistencyMs: 10_000, requestTimeoutMs: 10_000 });
  expect(settings).toMatchObject({ scope: 'local', policy: { version: expect.any(String) } });
  expect(runSettings(loadConfig({ STRIPE_IDEMPOTENCY_TTL_HOURS: '1' })).provider.dedupeWindowMs).toBe(54 * 60_000);
});

test("health is off unless HEALTH_ADDRESS names where; the drain waits the policy's longest attempt unless SHUTDOWN_GRACE_MS says", () => {
  const defaults = loadConfig({});
  expect(defaults.worker.health).toBeUndefined();
  expect(loadConfig({ HEALTH_ADDRESS: '0.0.0.0:8080' }).worker.health).toEqual({ host: '0.0.0.0', port: 8080 });
  expect(loadConfig({ HEALTH_ADDRESS: '[::]:0' }).worker.health).toEqual({ host: '::', port: 0 });
  // The default policy's longest attempt is an SMTP hand-over (30 s); a Stripe attempt (15 s) fits in it.
  const policy = runSettings(defaults).policy;
  expect(shutdownGraceMs(defaults.worker.shutdownGraceMs, policy)).toBe(policy.timeouts.smtp.startToCloseMs);
  expect(shutdownGraceMs(defaults.worker.shutdownGraceMs, policy)).toBeGreaterThanOrEqual(
    policy.timeouts.stripe.startToCloseMs,
  );
  expect(shutdownGraceMs(loadConfig({ SHUTDOWN_GRACE_MS: '5000' }).worker.shutdownGraceMs, policy)).toBe(5000);
  // A dead worker's runs wait the SDK's 10 s for it unless STICKY_TIMEOUT_MS says.
  expect(defaults.worker.stickyTimeoutMs).toBe(10_000);
  expect(loadConfig({ STICKY_TIMEOUT_MS: '1000' }).worker.stickyTimeoutMs).toBe(1000);
});

test('worker versioning is off unless WORKER_VERSIONING=on; on, the build id is the version and the bundle hash unless given', () => {
  expect(loadConfig({}).worker.versioning).toBeUndefined();
  expect(() => loadConfig({ WORKER_BUILD_ID: 'b1' })).toThrow(/WORKER_BUILD_ID: set WORKER_VERSIONING=on with it/);
  expect(() => loadConfig({ WORKER_VERSIONING: 'on', WORKER_DEPLOYMENT_NAME: 'refunds.prod' })).toThrow(
    /WORKER_DEPLOYMENT_NAME: must be/,
  );
  const pkg = { name: 'durable-refunds', version: '1.2.3' };
  // The build must be fixed ahead: a bundle made at start could hash differently on each host.
  expect(() => loadConfig({ WORKER_VERSIONING: 'on' })).toThrow(
    /WORKER_VERSIONING: .*set WORKFLOW_BUNDLE .* or WORKER_BUILD_ID/,
  );
  const on = loadConfig({ WORKER_VERSIONING: 'on', WORKFLOW_BUNDLE: 'lib/workflow-bundle.js' }).worker.versioning!;
  const a = deploymentVersion(on, () => 'workflow code A', pkg);
  expect(a).toEqual({ deploymentName: 'durable-refunds', buildId: expect.stringMatching(/^1\.2\.3-[0-9a-f]{12}$/) });
  // Other workflow code is another build; the same code built again is the same one.
  expect(buildIdFor('1.2.3', 'workflow code B')).not.toBe(a.buildId);
  expect(buildIdFor('1.2.3', 'workflow code A')).toBe(a.buildId);
  // Built in another checkout, only the source map differs: the same build.
  const mapped = (where: string) => `workflow code A\n//# sourceMappingURL=data:application/json;base64,${where}`;
  expect(buildIdFor('1.2.3', mapped('L3Nydi9h'))).toBe(buildIdFor('1.2.3', mapped('L2hvbWUvYg')));
  expect(buildIdFor('1.2.3', mapped('L3Nydi9h'))).toBe(a.buildId);
  const given = loadConfig({ WORKER_VERSIONING: 'on', WORKER_DEPLOYMENT_NAME: 'refunds-eu', WORKER_BUILD_ID: 'r42' });
  const bundle = jest.fn(() => 'never read');
  expect(deploymentVersion(given.worker.versioning!, bundle, pkg)).toEqual({
    deploymentName: 'refunds-eu',
    buildId: 'r42',
  });
  expect(bundle).not.toHaveBeenCalled();
  expect(deploymentOptions(a)).toEqual({
    version: a,
    useWorkerVersioning: true,
    defaultVersioningBehavior: 'PINNED',
  });
  expect(deploymentOptions(undefined)).toBeUndefined();
});

test("DECIDERS names who may decide and their public keys, replacing the policy's; DECISIONS_UNSIGNED=allow only when set", () => {
  const key = 'ab'.repeat(32);
  const config = loadConfig({ DECIDERS: `alice=operator:${key}, bob=operator+approver` });
  expect(config.deciders).toEqual({
    roles: { alice: ['operator'], bob: ['operator', 'approver'] },
    keys: { alice: key },
  });
  expect(runSettings(config).policy.decisions).toMatchObject({
    roles: { alice: ['operator'], bob: ['operator', 'approver'] },
    keys: { alice: key },
  });
  expect(runSettings(config).policy.decisions.unsigned).toBeUndefined();
  expect(runSettings(loadConfig({ DECISIONS_UNSIGNED: 'allow' })).policy.decisions.unsigned).toBe('allow');
  expect(() => loadConfig({ DECIDERS: 'alice=operator:not-a-key' })).toThrow(/DECIDERS: must be name=role/);
  expect(() => loadConfig({ DECISIONS_UNSIGNED: 'yes' })).toThrow(/DECISIONS_UNSIGNED/);
  expect(runSettings(loadConfig({})).policy.decisions.roles).toMatchObject({
    ops: ['operator'],
    lead: ['operator', 'approver'],
  });
});

test('webhooks: the local Stripe server and receiver share a fixed secret on loopback only; a real key, another host or WEBHOOKS=off needs its own or has none', () => {
  expect(loadConfig({}).webhooks).toMatchObject({
    secret: LOCAL_WEBHOOK_SECRET,
    url: 'http://127.0.0.1:4343/webhooks/stripe',
  });
  expect(loadConfig({ WEBHOOKS: 'off' }).webhooks.secret).toBeUndefined();
  expect(loadConfig({ WEBHOOK_HOST: '0.0.0.0' }).webhooks).toMatchObject({
    secret: undefined,
    url: 'http://127.0.0.1:4343/webhooks/stripe',
  });
  expect(loadConfig({ STRIPE_SECRET_KEY: 'sk_test_1', OPERATION_SCOPE: 'dev' }).webhooks.secret).toBeUndefined();
  expect(
    loadConfig({ STRIPE_SECRET_KEY: 'sk_test_1', OPERATION_SCOPE: 'dev', STRIPE_WEBHOOK_SECRET: 'whsec_abc' }).webhooks
      .secret,
  ).toBe('whsec_abc');
  expect(() => loadConfig({ WEBHOOKS: 'maybe' })).toThrow(/WEBHOOKS/);
});

describe('the Temporal target, read as the temporal CLI reads it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'envconfig-'));
  const file = path.join(dir, 'temporal.toml');
  fs.writeFileSync(
    file,
    [
      '[profile.default]',
      'address = "10.0.0.5:7233"',
      'namespace = "refunds-dev"',
      '',
      '[profile.cloud]',
      'address = "refunds.a1b2c.tmprl.cloud:7233"',
      'namespace = "refunds.a1b2c"',
      'api_key = "key-from-file"',
      '',
    ].join('\n'),
  );
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('nothing set: the local dev server, no TLS', () => {
    expect(loadConfig({}).temporal).toMatchObject({
      address: '127.0.0.1:7233',
      namespace: 'default',
      connection: { address: '127.0.0.1:7233' },
    });
    expect(loadConfig({}).temporal.connection.tls).toBeUndefined();
  });

  test('a profile from temporal.toml, and the environment over it', () => {
    expect(loadConfig({ TEMPORAL_CONFIG_FILE: file }).temporal).toMatchObject({
      address: '10.0.0.5:7233',
      namespace: 'refunds-dev',
    });
    const cloud = loadConfig({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'cloud' }).temporal;
    // An API key implies TLS, as Temporal Cloud needs.
    expect(cloud).toMatchObject({
      address: 'refunds.a1b2c.tmprl.cloud:7233',
      namespace: 'refunds.a1b2c',
      profile: 'cloud',
      connection: { apiKey: 'key-from-file', tls: true },
    });
    const overridden = loadConfig({
      TEMPORAL_CONFIG_FILE: file,
      TEMPORAL_PROFILE: 'cloud',
      TEMPORAL_API_KEY: 'key-from-env',
      TEMPORAL_NAMESPACE: 'other.a1b2c',
    }).temporal;
    expect(overridden).toMatchObject({ namespace: 'other.a1b2c', connection: { apiKey: 'key-from-env' } });
    expect(
      loadConfig({ TEMPORAL_ADDRESS: 'temporal.internal:7233', TEMPORAL_TLS: 'true' }).temporal.connection,
    ).toMatchObject({ address: 'temporal.internal:7233', tls: {} });
  });

  test('a profile that does not exist is refused, naming where it was looked for', () => {
    expect(() => loadConfig({ TEMPORAL_CONFIG_FILE: file, TEMPORAL_PROFILE: 'staging' })).toThrow(
      /Temporal client configuration .*Profile 'staging' not found/,
    );
  });
});

describe('settings for real money', () => {
  test('a live-mode Stripe key is refused unless STRIPE_LIVE_MODE=allow', () => {
    for (const key of ['sk_live_abc', 'rk_live_abc']) {
      expect(() => loadConfig({ STRIPE_SECRET_KEY: key, OPERATION_SCOPE: 'prod' })).toThrow(
        /STRIPE_SECRET_KEY: a live-mode key refunds real money; .*STRIPE_LIVE_MODE=allow/,
      );
    }
    const live = loadConfig({ STRIPE_SECRET_KEY: 'sk_live_abc', OPERATION_SCOPE: 'prod', STRIPE_LIVE_MODE: 'allow' });
    expect(live).toMatchObject({ stripeLiveMode: true, stripe: { local: false } });
    expect(() => loadConfig({ STRIPE_LIVE_MODE: 'yes' })).toThrow(/STRIPE_LIVE_MODE/);
  });

  test("with real Stripe the key window is at most Stripe's 24 hours less the margin: a longer one is refused at start", () => {
    const real = { STRIPE_SECRET_KEY: 'sk_test_123', OPERATION_SCOPE: 'staging' };
    expect(() => loadConfig({ ...real, STRIPE_IDEMPOTENCY_TTL_HOURS: '48' })).toThrow(
      /invalid environment: STRIPE_IDEMPOTENCY_TTL_HOURS: Stripe keeps an idempotency key's response for 24 hours; with real Stripe this must be at most 24 \(48 given\)/,
    );
    expect(() => loadConfig({ ...real, STRIPE_IDEMPOTENCY_TTL_HOURS: '24.5' })).toThrow(/STRIPE_IDEMPOTENCY_TTL_HOURS/);
    expect(runSettings(loadConfig({ ...real, STRIPE_IDEMPOTENCY_TTL_HOURS: '24' })).provider.dedupeWindowMs).toBe(
      23 * 3600_000,
    );
    // The local Stripe-compatible server keeps a key's response as long as it is told to.
    expect(loadConfig({ STRIPE_IDEMPOTENCY_TTL_HOURS: '48' }).stripe.idempotencyTtlMs).toBe(48 * 3600_000);
    expect(
      loadConfig({ ...real, STRIPE_API_BASE: 'http://127.0.0.1:9', STRIPE_IDEMPOTENCY_TTL_HOURS: '48' }).stripe.local,
    ).toBe(true);
  });

  test('a real key through an API base off this machine (an egress proxy) is real Stripe: scope required, key window capped', () => {
    const proxied = {
      STRIPE_SECRET_KEY: 'sk_live_abc',
      STRIPE_LIVE_MODE: 'allow',
      STRIPE_API_BASE: 'https://stripe-proxy.internal',
    };
    expect(() => loadConfig(proxied)).toThrow(/OPERATION_SCOPE: must name this environment/);
    expect(() => loadConfig({ ...proxied, OPERATION_SCOPE: 'prod', STRIPE_IDEMPOTENCY_TTL_HOURS: '48' })).toThrow(
      /STRIPE_IDEMPOTENCY_TTL_HOURS: .* at most 24 \(48 given\)/,
    );
    // Its requests still go through the proxy; no local server is started for it.
    expect(loadConfig({ ...proxied, OPERATION_SCOPE: 'prod' }).stripe).toMatchObject({
      local: false,
      apiBase: 'https://stripe-proxy.internal',
    });
    // A live key is never the local stand-in's, wherever it is sent.
    expect(() => loadConfig({ ...proxied, STRIPE_API_BASE: 'http://127.0.0.1:9' })).toThrow(
      /OPERATION_SCOPE: must name this environment/,
    );
    // Loopback, however written, is the local stand-in.
    for (const base of ['http://127.0.0.2:9', 'http://localhost:9', 'http://[::1]:9']) {
      expect(
        loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_API_BASE: base, STRIPE_IDEMPOTENCY_TTL_HOURS: '48' })
          .stripe,
      ).toMatchObject({ local: true, apiBase: base });
    }
  });

  test('a relay off this machine gets STARTTLS unless told otherwise; credentials stay out of the URL', () => {
    expect(loadConfig({}).mail.smtp).toEqual({ auth: undefined, tls: 'off', rejectUnauthorized: true });
    expect(
      loadConfig({ SMTP_URL: 'smtp://relay.example.com:587', SMTP_USER: 'refunds', SMTP_PASSWORD: 's3cret' }).mail.smtp,
    ).toEqual({
      auth: { user: 'refunds', pass: 's3cret' },
      tls: 'starttls',
      rejectUnauthorized: true,
    });
    expect(loadConfig({ SMTP_URL: 'smtps://relay.example.com' }).mail.smtp.tls).toBe('implicit');
    // Loopback is 127.0.0.0/8 as an address: a name that only looks like one may resolve anywhere.
    expect(loadConfig({ SMTP_URL: 'smtp://127.0.0.2:25' }).mail.smtp.tls).toBe('off');
    expect(loadConfig({ SMTP_URL: 'smtp://127.300.0.1:25' }).mail.smtp.tls).toBe('starttls');
    expect(loadConfig({ SMTP_URL: 'smtp://relay.example.com', SMTP_TLS: 'off' }).mail.smtp.tls).toBe('off');
    expect(() => loadConfig({ SMTP_PASSWORD: 'x' })).toThrow(/SMTP_PASSWORD: set SMTP_USER with it/);
    expect(() => loadConfig({ SMTP_TLS: 'maybe' })).toThrow(/SMTP_TLS/);
    expect(() => loadConfig({ SMTP_URL: 'user:pw@nothing' })).toThrow(/SMTP_URL: .* is not a URL/);
  });

  test('the task queue is configurable and checked', () => {
    expect(loadConfig({}).taskQueue).toBe('refunds');
    expect(loadConfig({ TASK_QUEUE: 'refunds-eu' }).taskQueue).toBe('refunds-eu');
    expect(() => loadConfig({ TASK_QUEUE: 'has space' })).toThrow(/TASK_QUEUE/);
  });
});
