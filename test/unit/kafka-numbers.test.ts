// Offsets travel as decimal strings; anything else is refused by the schema (a 400 naming the
// field), never thrown by BigInt (a 500).
import { offset } from '../../src/api/kafka-numbers.ts';

test.each(['abc', '-1', '1.5', '', '01', '9223372036854775808'])('offset %p is refused', (s) => {
  const result = offset.safeParse(s);
  expect(result.success).toBe(false);
});

test.each(['0', '42', '9223372036854775807'])('offset %p is accepted', (s) => {
  expect(offset.parse(s)).toBe(s);
});
