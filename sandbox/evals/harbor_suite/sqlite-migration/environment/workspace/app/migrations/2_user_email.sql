CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    what TEXT NOT NULL
);
ALTER TABLE users ADD COLUMN email TEXT NOT NULL;
CREATE UNIQUE INDEX users_email ON users(email) WHERE email <> '';
INSERT INTO audit (what) VALUES ('users.email added');
