\set aid random(1, 1000)
SELECT abalance AS bal, aid FROM pgbench_accounts WHERE aid = :aid \gset
SELECT 2 AS two, 3 AS three;
\gset p_
UPDATE pgbench_accounts SET abalance = :bal + :p_two WHERE aid = :aid;
