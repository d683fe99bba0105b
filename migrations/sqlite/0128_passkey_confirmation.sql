-- A first passkey registered while approvals require passkeys (issue 36) proves nothing but the
-- password, so it approves only once another admin confirms it (privilege request
-- confirm_passkey). confirmed_at: epoch ms UTC of that confirmation, or of the registration
-- for a passkey that needed none; NULL while it waits. Every earlier passkey stands confirmed.
ALTER TABLE passkeys ADD COLUMN confirmed_at INTEGER;
UPDATE passkeys SET confirmed_at = created_at;
