import { loadConfig } from '../../src/config';

test('defaults point at the embedded stack on loopback', () => {
  const config = loadConfig({});
  expect(config.temporal.address).toBe('127.0.0.1:7233');
  expect(config.stripe).toMatchObject({ local: true, apiBase: 'http://127.0.0.1:4242' });
  expect(config.databaseUrl).toMatch(/^sqlite:.*orders\.db$/);
});

test('a real Stripe key without an API base talks to real Stripe', () => {
  expect(loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123' }).stripe).toMatchObject({ local: false, apiBase: undefined });
  expect(loadConfig({ STRIPE_SECRET_KEY: 'sk_test_123', STRIPE_API_BASE: 'http://127.0.0.1:9' }).stripe.local).toBe(true);
});

test.each([
  [{ STRIPE_PORT: 'abc' }, /STRIPE_PORT/],
  [{ SMTP_PORT: '70000' }, /SMTP_PORT/],
  [{ STRIPE_API_BASE: 'not a url' }, /STRIPE_API_BASE/],
  [{ MAIL_FROM: 'nobody' }, /MAIL_FROM/],
])('a bad environment %j is refused naming the variable', (env, message) => {
  expect(() => loadConfig(env)).toThrow(message);
});
