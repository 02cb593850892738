-- A customer looks at their account and last orders; recent customers
-- (low ids) come back more often. Only reads: it may run at a replica.
\set customer random_exponential(1, 10000, 5)
SELECT name, balance FROM customer WHERE id = :customer;
SELECT o.id, p.name, o.qty, o.placed
  FROM orders o JOIN product p ON p.id = o.product_id
  WHERE o.customer_id = :customer
  ORDER BY o.placed DESC
  LIMIT 5;
