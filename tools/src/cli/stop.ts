import { loadToolsConfig } from '../config';
import { stopStack } from '../stack/stack';

async function main() {
  const stopped = await stopStack(loadToolsConfig());
  console.log(stopped.length ? `stopped: ${stopped.join(', ')}` : 'nothing of this stack was running');
}

main().catch((err) => {
  console.error(`stop: ${(err as Error).message}`);
  process.exit(1);
});
