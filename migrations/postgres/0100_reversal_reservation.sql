-- A reversal reserves the payment before it refunds at the channel (issue 13): the id of the
-- ops action that holds the reservation. Set by a conditional update pinned to the approved
-- version while no merchant refund is pending; merchant refunds are refused while it is set.
-- Cleared only if the channel refuses the reversal's refund.
ALTER TABLE payments ADD COLUMN reversal_id TEXT;
