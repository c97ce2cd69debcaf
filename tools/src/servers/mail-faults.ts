// Faults the local SMTP server injects, armed through the mailbox API (POST /_faults) and scoped
// by recipient so that tests running side by side do not disturb each other.
import { z } from 'zod';
import { spacing, takeDue, unfired, type Spaced } from './due-fault';

export const MAIL_FAULT_KINDS = [
  /** Answer a command with an SMTP error reply (4xx: try later; 5xx: refused for good). */
  'reply',
  /** Store the message, then cut the connection before the final 250: the client never learns it was accepted. */
  'drop_after_accept',
  /**
   * Answer the final dot only after delayMs, a relay that is slow to take a message. It takes it when its 250 goes
   * out (RFC 5321 §6.1), so a client that hung up before then left nothing behind.
   */
  'accept_late',
] as const;

export const mailFaultSchema = z
  .object({
    kind: z.enum(MAIL_FAULT_KINDS),
    /** For reply: the command answered with the error. rcpt and data can be scoped by recipient. */
    stage: z.enum(['connect', 'mail', 'rcpt', 'data']).default('rcpt'),
    code: z.number().int().min(400).max(599).default(451),
    message: z.string().min(1).max(300).default('4.3.0 temporary failure (injected)'),
    /** For reply: how long the error reply is held; for accept_late (required): how long the 250 is. */
    delayMs: z.number().int().min(0).max(600_000).optional(),
    /** recipient: any stage; messageId: the data stage, drop_after_accept and accept_late, where the message is known. */
    match: z
      .object({ recipient: z.string().min(1).optional(), messageId: z.string().min(1).optional() })
      .strict()
      .default({}),
    ...spacing,
  })
  .strict()
  .refine((f) => f.kind !== 'accept_late' || f.delayMs !== undefined, {
    message: 'accept_late needs delayMs',
    path: ['delayMs'],
  });

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
    /** How long to hold the 250 for this message, if an accept_late fault takes it. */
    acceptLate(recipients: string[], messageId: string | undefined): number | undefined {
      return takeDue(armed, (f) => f.kind === 'accept_late' && forMessage(f, recipients, messageId))?.delayMs;
    },
  };
}

export type MailFaults = ReturnType<typeof createMailFaults>;
