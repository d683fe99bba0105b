-- Password checks of the console (sign-ins and approval step-ups), counted in the database so
-- that every server sharing it applies one limit (issue 13 "Console authentication"; OWASP
-- Authentication Cheat Sheet, "Login Throttling"). A row is written before the password is
-- verified (outcome 'pending', counted as a failure) and then marked 'failed' or 'ok'.
-- account: the name as typed, lowercased, at most 64 characters; addr: the client address.
-- Mirrors ../postgres/0103_auth_attempts.sql.
CREATE TABLE auth_attempts (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    account  TEXT    NOT NULL,
    addr     TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    outcome  TEXT    NOT NULL,
    at       INTEGER NOT NULL
);
CREATE INDEX auth_attempts_addr ON auth_attempts (addr, at);
CREATE INDEX auth_attempts_pair ON auth_attempts (addr, account, id);
CREATE INDEX auth_attempts_at ON auth_attempts (at);
