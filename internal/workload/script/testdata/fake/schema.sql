CREATE TABLE kv (k bigint PRIMARY KEY, v bigint NOT NULL);
CREATE INDEX kv_v ON kv (v);
