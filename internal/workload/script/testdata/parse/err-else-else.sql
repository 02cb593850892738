\if true
SELECT 1;
\else
SELECT 2;
\else
\endif
