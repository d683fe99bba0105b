-- The audit viewer lists the actions the log holds (issue 41: the action filter was free text
-- that had to match exactly). With this index the list is one index seek per distinct action
-- (a recursive "skip scan"), not a scan of the whole log.
CREATE INDEX audit_log_action ON audit_log (action);
