-- pgbench -i's data at scale 1: COPY blocks for the small tables, SQL for the big one.
COPY pgbench_branches (bid, bbalance, filler) FROM STDIN;
1	0	\N
\.
COPY pgbench_tellers (tid, bid, tbalance) FROM STDIN;
1	1	0
2	1	0
3	1	0
4	1	0
5	1	0
6	1	0
7	1	0
8	1	0
9	1	0
10	1	0
\.
INSERT INTO pgbench_accounts (aid, bid, abalance, filler) SELECT aid, (aid - 1) / 100000 + 1, 0, '' FROM generate_series(1, 100000) AS aid;
VACUUM ANALYZE;
