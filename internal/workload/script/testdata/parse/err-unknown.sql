SELECT 1;
\frobnicate
