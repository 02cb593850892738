\set k random(1, 5)
\set z random(0, 30)
\set v 1000 / :z
BEGIN;
UPDATE kv SET v = :v WHERE k = :k;
END;
