SELECT 1;
UPDATE t
  SET v = :v;
