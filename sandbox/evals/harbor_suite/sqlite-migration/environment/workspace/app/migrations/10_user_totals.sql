CREATE VIEW user_totals AS
    SELECT u.id, u.name, u.email, o.currency, SUM(o.amount_cents) AS total_cents
    FROM users u JOIN orders o ON o.user_id = u.id
    GROUP BY u.id, o.currency;
INSERT INTO audit (what) VALUES ('user_totals view');
