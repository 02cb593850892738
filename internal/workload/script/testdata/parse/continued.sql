\set x 1 + \
  2 * \
  3
SELECT :x
