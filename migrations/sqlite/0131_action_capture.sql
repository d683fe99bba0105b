-- Capture and void of a manual-capture payment's hold as ops actions under maker-checker
-- (issue 34). A capture request carries what the operator asked for, so the approver signs off
-- on exactly that and the execution captures exactly that: the amount (integer minor units of
-- the payment's currency) and whether it is the final capture (the rest is released after it).
-- NULL for every other kind.
ALTER TABLE actions ADD COLUMN capture_amount INTEGER CHECK (capture_amount IS NULL OR capture_amount > 0);
ALTER TABLE actions ADD COLUMN capture_final INTEGER;
