-- The fake engine types values loosely: plain INSERTs here; COPY blocks
-- are tested against PostgreSQL.
INSERT INTO kv (k, v) VALUES (1, 10), (2, 20), (3, 30), (4, 40);
INSERT INTO kv (k, v) VALUES (5, 50);
