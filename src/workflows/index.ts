export * from './refund';
