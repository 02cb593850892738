-- Ten products (a COPY block, as pg_dump writes them) and 10000 customers.
COPY product (id, name, price, stock) FROM STDIN;
1	tea	3.50	1000000
2	coffee	4.20	1000000
3	cocoa	3.90	1000000
4	juice	2.80	1000000
5	water	1.00	1000000
6	milk	1.60	1000000
7	bread	2.40	1000000
8	cheese	6.90	1000000
9	apples	3.10	1000000
10	honey	7.50	1000000
\.
INSERT INTO customer (id, name) SELECT i, 'customer ' || i FROM generate_series(1, 10000) AS i;
ANALYZE;
