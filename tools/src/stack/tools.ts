import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from '../../../src/config';

export type ToolName = 'temporal' | 'stripe-mock' | 'toxiproxy-server' | 'postgres' | 'chromium';

/**
 * The path of an external binary, found (or built once into the cache outside the checkout)
 * by scripts/ensure-tools.sh, which honours TEMPORAL_CLI / STRIPE_MOCK_BIN / TOXIPROXY_BIN, PATH and the cache.
 */
export function findTool(name: ToolName): string {
  const script = path.join(PROJECT_ROOT, 'scripts', 'ensure-tools.sh');
  let out: string;
  try {
    out = execFileSync('bash', [script, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  } catch {
    throw new Error(
      `could not find or build ${name}: see the messages above, or run \`bash scripts/ensure-tools.sh ${name}\``,
    );
  }
  const line = out.split('\n').find((l) => l.startsWith(`${name}=`));
  if (!line) throw new Error(`scripts/ensure-tools.sh printed no path for ${name}`);
  return line.slice(name.length + 1);
}
