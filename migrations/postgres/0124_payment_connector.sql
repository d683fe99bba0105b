-- The connector home (issue 33): the connector a payment was routed to at its create
-- (service/connectors.rs: per merchant, and per payment method when there are several),
-- so that every later channel call on it (query, cancel, refund, capture, void) goes to the
-- connector that took it. Payments made before connectors had names were all the sandbox's
-- (or the one channel at --channel-url), which is the default connector's name.
-- Mirrors ../sqlite/0124_payment_connector.sql.
ALTER TABLE payments ADD COLUMN connector TEXT NOT NULL DEFAULT 'sandbox';
