export * from './refund';
export * from './batch';
export * from './digest';
export * from './sweep';
