// fromRow renames a row's columns to the record's fields: the same record whether a column's name was seen before or not.
import { fromRow } from '../../src/store/rows';

describe('fromRow', () => {
  it('renames each snake_case column to its camelCase field and keeps the values as they are', () => {
    const row = { id: 7, order_id: 'o-1', proven_absent_through: null, off_the_wire_by: '2026-01-01T00:00:00.000Z' };
    const expected = { id: 7, orderId: 'o-1', provenAbsentThrough: null, offTheWireBy: '2026-01-01T00:00:00.000Z' };
    expect(fromRow(row)).toStrictEqual(expected);
    // Read again, the names come from the cache: the same record, fields in the row's order.
    expect(fromRow(row)).toStrictEqual(expected);
    expect(Object.keys(fromRow(row))).toEqual(['id', 'orderId', 'provenAbsentThrough', 'offTheWireBy']);
  });

  it('gives each row its own record', () => {
    const first = fromRow({ order_id: 'a' });
    expect(fromRow({ order_id: 'b' })).toEqual({ orderId: 'b' });
    expect(first).toEqual({ orderId: 'a' });
  });
});
