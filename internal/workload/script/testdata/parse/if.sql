\set n random(1, 10)
\if :n < 3
  SELECT 'low';
\elif :n < 7
  \if :n % 2 = 0
    SELECT 'mid even';
  \else
    SELECT 'mid odd';
  \endif
\else
  UPDATE t SET v = v + 1
    WHERE id = :n;
\endif
SELECT :n;
