\set k random(1, 5)
SELECT v FROM kv WHERE k = :k \gset
\if :v >= 0
  SELECT v FROM kv WHERE k = :k;
\endif
