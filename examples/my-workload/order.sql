-- Place an order: any customer, a popular product (Zipf: product 1 the
-- most often), one to three of it.
\set customer random(1, 10000)
\set product random_zipfian(1, 10, 1.5)
\set qty random(1, 3)
BEGIN;
UPDATE product SET stock = stock - :qty WHERE id = :product;
INSERT INTO orders (customer_id, product_id, qty) VALUES (:customer, :product, :qty);
UPDATE customer SET balance = balance - :qty * (SELECT price FROM product WHERE id = :product)
  WHERE id = :customer;
END;
