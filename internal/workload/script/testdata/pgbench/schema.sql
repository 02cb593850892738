-- pgbench's tables (pgbench -i, scale 1), with their primary keys.
CREATE TABLE pgbench_branches (bid int NOT NULL PRIMARY KEY, bbalance int, filler char(88)) WITH (fillfactor = 100);
CREATE TABLE pgbench_tellers (tid int NOT NULL PRIMARY KEY, bid int, tbalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_accounts (aid int NOT NULL PRIMARY KEY, bid int, abalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
