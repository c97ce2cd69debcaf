// Faults the local SMTP server injects, armed through the mailbox API (POST /_faults) and scoped
// by recipient so that tests running side by side do not disturb each other.
import { z } from 'zod';
import { spacing, takeDue, unfired, type Spaced } from './due-fault';

export const MAIL_FAULT_KINDS = [
  /** Answer a command with an SMTP error reply (4xx: try later; 5xx: refused for good). */
  'reply',
  /** Store the message, then cut the connection before the final 250: the client never learns it was accepted. */
  'drop_after_accept',
] as const;

export const mailFaultSchema = z
  .object({
    kind: z.enum(MAIL_FAULT_KINDS),
    /** For reply: the command answered with the error. rcpt and data can be scoped by recipient. */
    stage: z.enum(['connect', 'mail', 'rcpt', 'data']).default('rcpt'),
    code: z.number().int().min(400).max(599).default(451),
    message: z.string().min(1).max(300).default('4.3.0 temporary failure (injected)'),
    delayMs: z.number().int().min(0).max(600_000).optional(),
    /** recipient: any stage; messageId: the data stage and drop_after_accept, where the message is known. */
    match: z
      .object({ recipient: z.string().min(1).optional(), messageId: z.string().min(1).optional() })
      .strict()
      .default({}),
    ...spacing,
  })
  .strict();

export type MailFaultSpec = z.output<typeof mailFaultSchema>;
export interface ArmedMailFault extends MailFaultSpec, Spaced {
  id: string;
}

export type MailStage = MailFaultSpec['stage'];

export function createMailFaults() {
  const armed: ArmedMailFault[] = [];
  let next = 1;
  const forMessage = (f: ArmedMailFault, recipients: string[], messageId: string | undefined) =>
    (f.match.recipient === undefined || recipients.some((r) => r.toLowerCase() === f.match.recipient!.toLowerCase())) &&
    (f.match.messageId === undefined || f.match.messageId === messageId);

  return {
    arm(input: unknown): ArmedMailFault {
      const spec = mailFaultSchema.parse(input);
      const fault = { ...spec, id: `mailfault_${next++}`, ...unfired(spec.count) };
      armed.push(fault);
      return fault;
    },
    list: (): ArmedMailFault[] => armed.map((f) => ({ ...f })),
    clear(id?: string): number {
      const before = armed.length;
      armed.splice(0, armed.length, ...armed.filter((f) => id !== undefined && f.id !== id));
      return before - armed.length;
    },
    /** An error reply for this stage, given the recipients (and, at data, the Message-ID) known so far. */
    reply(stage: MailStage, recipients: string[], messageId?: string): ArmedMailFault | undefined {
      return takeDue(armed, (f) => f.kind === 'reply' && f.stage === stage && forMessage(f, recipients, messageId));
    },
    /** Whether to cut the connection after storing this message. */
    dropAfterAccept(recipients: string[], messageId: string | undefined): ArmedMailFault | undefined {
      return takeDue(armed, (f) => f.kind === 'drop_after_accept' && forMessage(f, recipients, messageId));
    },
  };
}

export type MailFaults = ReturnType<typeof createMailFaults>;
