-- A small shop: customers, products and their orders. Every table has a
-- primary key (logical and multi-master replication match rows by it).
CREATE TABLE customer (
    id      int PRIMARY KEY,
    name    text NOT NULL,
    balance numeric(12, 2) NOT NULL DEFAULT 0
);
CREATE TABLE product (
    id    int PRIMARY KEY,
    name  text NOT NULL,
    price numeric(10, 2) NOT NULL,
    stock int NOT NULL
);
CREATE TABLE orders (
    id          bigserial PRIMARY KEY,
    customer_id int NOT NULL,
    product_id  int NOT NULL,
    qty         int NOT NULL,
    placed      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_customer ON orders (customer_id, placed);
