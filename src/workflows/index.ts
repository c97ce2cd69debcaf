export * from './refund';
export * from './batch';
export * from './digest';
export * from './sweep';
export * from './provider-events';
export * from './late-failure';
