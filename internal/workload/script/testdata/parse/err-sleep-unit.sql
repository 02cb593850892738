\set x 1
\sleep 1 min
SELECT 1;
