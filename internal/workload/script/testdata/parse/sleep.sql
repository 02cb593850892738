\set t random(10, 20)
\sleep :t ms
\sleep 1
\sleep 250 us
SELECT 1;
