SELECT 1;
\endif
