-- When each console user last signed in (epoch ms UTC; NULL: never), for the admin page's
-- "Last sign-in" column (issue 17). Written after the sign-in's audit record; the audit log
-- stays the proof, this is its summary. Mirrors ../sqlite/0105_user_last_sign_in.sql.
ALTER TABLE users ADD COLUMN last_sign_in_at BIGINT;
