\set x 1
\if :x
SELECT 1;
\else
SELECT 2;
