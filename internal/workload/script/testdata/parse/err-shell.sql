SELECT 1;
\shell echo hi
