SELECT 1;
\set x random(1, :y)
