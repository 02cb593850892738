-- comments, quotes and casts keep their colons
\set id 1
SELECT ':id', ":id", E'it\'s :id', $$ :id; $$, $tag$ ; $tag$, x::int, '{1,2}'::int[]
  FROM t /* a :id comment; /* nested */ still */ WHERE id = :id -- :id;
  AND k = :id;
;;
WITH up AS (UPDATE t SET v = 1 WHERE id = :id RETURNING *) SELECT * FROM up;
SELECT * FROM t WHERE id = :id FOR UPDATE;
BEGIN; END;
SELECT 1 \gset
