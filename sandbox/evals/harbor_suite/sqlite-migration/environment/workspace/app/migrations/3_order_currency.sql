ALTER TABLE orders ADD COLUMN currency TEXT NOT NULL DEFAULT 'EUR';
INSERT INTO audit (what) VALUES ('orders.currency added');
