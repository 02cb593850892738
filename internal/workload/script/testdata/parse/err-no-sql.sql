\set x 1
