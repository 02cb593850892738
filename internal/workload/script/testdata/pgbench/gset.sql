-- \gset and \if on a query's result: run statement by statement.
\set aid random(1, 100000 * :scale)
SELECT abalance, aid AS got FROM pgbench_accounts WHERE aid = :aid \gset
\if :abalance >= 0
  UPDATE pgbench_accounts SET abalance = :abalance + 1 WHERE aid = :got;
\else
  UPDATE pgbench_accounts SET abalance = 0 WHERE aid = :got;
\endif
